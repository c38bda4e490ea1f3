#include "launcher/chat.h"

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"

namespace llama {
namespace {

using nlohmann::json;

// Set by Ctrl-C: an answer that streams stops there. The handler also
// writes to a pipe that the prompt's read watches, so a Ctrl-C that comes
// just before the read starts is not lost.
std::atomic<bool> g_interrupted{false};
int g_interrupt_pipe[2] = {-1, -1};
void OnInterrupt(int) {
  g_interrupted = true;
  const char byte = 1;
  const ssize_t ignored = write(g_interrupt_pipe[1], &byte, 1);
  (void)ignored;
}

// Lines of the user's input, read from the descriptor directly (no stdio
// buffer hides data from poll).
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // The next line without its newline; false at end of input. A Ctrl-C at
  // the prompt gives an empty line.
  bool Next(std::string& line) {
    while (true) {
      if (const size_t end = pending_.find('\n'); end != std::string::npos) {
        line = pending_.substr(0, end);
        pending_.erase(0, end + 1);
        return true;
      }
      if (eof_) {
        line = pending_;
        pending_.clear();
        return !line.empty();
      }
      pollfd fds[2] = {{fd_, POLLIN, 0}, {g_interrupt_pipe[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;  // EINTR: look again.
      if (fds[1].revents & POLLIN) {
        char drain[64];
        while (read(g_interrupt_pipe[0], drain, sizeof drain) > 0) {
        }
        line.clear();
        return true;
      }
      char buffer[4096];
      const ssize_t n = read(fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) eof_ = true;
      if (n > 0) pending_.append(buffer, n);
    }
  }

 private:
  int fd_;
  std::string pending_;
  bool eof_ = false;
};

// The assistant's answer to a turn, or why there is none.
struct Reply {
  std::string text;
  std::string error;      // Empty when the answer came (perhaps stopped by Ctrl-C).
  bool too_long = false;  // The server's context_length_exceeded: the dialog does not fit.
};

// Streams the assistant's answer to `messages` onto `out`.
Reply Answer(httplib::Client& client, const ChatSessionOptions& options, const json& messages) {
  const TokenSampling& token = options.sampling.token;
  json body = {{"model", options.model},         {"messages", messages},   {"stream", true},
               {"temperature", token.temperature}, {"top_p", token.top_p}, {"typical_p", token.typical_p},
               {"seed", options.sampling.seed}};
  if (options.max_tokens >= 0) body["max_tokens"] = options.max_tokens;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/chat/completions";
  request.set_header("Content-Type", "application/json");
  request.set_header("Authorization", "Bearer " + options.api_key);
  request.body = body.dump();
  std::string text, pending, error;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    pending.append(data, length);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      if (!absl::StartsWith(event, "data: {")) continue;
      const json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("error")) error = chunk["error"].value("message", "the server failed");
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      const std::string delta = chunk["choices"][0]["delta"].value("content", "");
      text += delta;
      std::fputs(delta.c_str(), options.out);
      std::fflush(options.out);
    }
    return !g_interrupted;
  };
  httplib::Response response;
  httplib::Error failure;
  const bool sent = client.send(request, response, failure);
  if (g_interrupted) return {text, "", false};
  if (!sent) return {"", httplib::to_string(failure), false};
  if (response.status != 200) {
    // With a content receiver installed, an error's body went to it.
    const std::string& raw = response.body.empty() ? pending : response.body;
    const json reply = json::parse(raw, nullptr, false);
    if (reply.is_discarded() || !reply.contains("error") || !reply["error"].is_object()) {
      return {"", absl::StrCat("HTTP ", response.status, raw.empty() ? "" : ": ", raw), false};
    }
    const json& e = reply["error"];
    const std::string message = e.contains("message") && e["message"].is_string()
                                    ? e["message"].get<std::string>()
                                    : absl::StrCat("HTTP ", response.status);
    return {"", message, e.contains("code") && e["code"] == "context_length_exceeded"};
  }
  return {text, error, false};
}

// The answer to the dialog's last turn. While the dialog does not fit the
// model's context, its oldest exchange is dropped (the system prompt stays)
// and the turn is asked again, saying so: a long chat goes on, forgetting
// its start, instead of failing every turn until /reset. A last turn that
// alone does not fit is an error.
Reply AnswerWithinContext(httplib::Client& client, const ChatSessionOptions& options, size_t system_messages,
                          json& messages) {
  Reply reply = Answer(client, options, messages);
  while (reply.too_long && messages.size() > system_messages + 1) {
    // The oldest user turn and, unless a failed turn left none, its answer.
    messages.erase(system_messages);
    if (messages.size() > system_messages + 1 && messages[system_messages]["role"] == "assistant") {
      messages.erase(system_messages);
    }
    std::fputs("(the history no longer fits the model's context: its oldest turn is dropped)\n", options.out);
    std::fflush(options.out);
    reply = Answer(client, options, messages);
  }
  if (reply.too_long) reply.error += " (/reset starts a new dialog)";
  return reply;
}

// The job behind a chat, supervised on its own thread, and its server's
// port once rank 0 says where it listens.
class ChatServer {
 public:
  ChatServer(const std::vector<WorkerLaunch>& workers, SupervisorOptions supervise) {
    supervise.catch_sigint = false;
    supervise.stop = &stop_;
    supervise.progress = nullptr;
    supervise.on_progress = [this](absl::string_view line) {
      static const std::regex url("on http://[^:]+:([0-9]+)/v1");
      std::smatch match;
      const std::string text(line);
      if (std::regex_search(text, match, url)) {
        absl::MutexLock lock(&mutex_);
        port_ = std::stoi(match[1]);
      }
    };
    // SIGINT must reach the chat's thread (it interrupts the read at the
    // prompt or the answer's stream), never the supervisor's: that thread
    // starts with it blocked.
    sigset_t interrupt, previous;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    pthread_sigmask(SIG_BLOCK, &interrupt, &previous);
    supervisor_ = std::thread([this, &workers, supervise] {
      absl::StatusOr<JobOutcome> outcome = SuperviseJob(workers, supervise);
      absl::MutexLock lock(&mutex_);
      outcome_ = std::move(outcome);
      ended_ = true;
    });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  // The server's port once it is up; 0 when the job ended without it.
  int WaitForPort() {
    absl::MutexLock lock(&mutex_);
    mutex_.Await(absl::Condition(this, &ChatServer::ReadyOrEnded));
    return port_;
  }

  bool Ended() {
    absl::MutexLock lock(&mutex_);
    return ended_;
  }

  // Ends the job; its outcome.
  absl::StatusOr<JobOutcome> Stop() {
    stop_ = true;
    supervisor_.join();
    return outcome_;
  }

 private:
  bool ReadyOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return port_ > 0 || ended_; }

  std::atomic<bool> stop_{false};
  absl::Mutex mutex_;
  int port_ ABSL_GUARDED_BY(mutex_) = 0;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  absl::StatusOr<JobOutcome> outcome_ = absl::UnknownError("not run");
  std::thread supervisor_;
};

// The dialog, turn by turn, until /exit, the end of input or the job's end;
// the last turn's error if it failed (the chat then exits non-zero, so a
// script sees it), or "".
std::string Converse(httplib::Client& client, const ChatSessionOptions& options, ChatServer& server) {
  const bool tty = isatty(fileno(options.in));
  const json system = options.system_prompt.empty()
                          ? json::array()
                          : json::array({{{"role", "system"}, {"content", options.system_prompt}}});
  json messages = system;
  LineReader input(fileno(options.in));
  std::string line, last_error;
  while (!server.Ended()) {
    if (tty) {
      std::fputs("> ", options.out);
      std::fflush(options.out);
    }
    g_interrupted = false;
    if (!input.Next(line)) break;
    const std::string turn(absl::StripAsciiWhitespace(line));
    if (turn.empty()) {
      if (tty) std::fputc('\n', options.out);
      continue;
    }
    if (turn == "/exit") break;
    last_error.clear();
    if (turn == "/reset") {
      messages = system;
      std::fputs("(history cleared)\n", options.out);
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", turn}});
    const Reply reply = AnswerWithinContext(client, options, system.size(), messages);
    // A Ctrl-C that stopped the answer is spent: the prompt must not see it.
    for (char drain[64]; read(g_interrupt_pipe[0], drain, sizeof drain) > 0;) {
    }
    if (!reply.error.empty()) {
      std::fprintf(options.out, "error: %s\n", reply.error.c_str());
      messages.erase(messages.size() - 1);  // The turn did not happen.
      last_error = reply.error;
      continue;
    }
    std::fputs(g_interrupted ? " [stopped]\n" : "\n", options.out);
    std::fflush(options.out);
    messages.push_back({{"role", "assistant"}, {"content", reply.text}});
  }
  return last_error;
}

}  // namespace

absl::Status RunChatSession(const std::vector<WorkerLaunch>& workers, SupervisorOptions supervise,
                            const ChatSessionOptions& options) {
  ChatServer server(workers, std::move(supervise));
  int port = server.WaitForPort();
  std::string last_error;
  if (port > 0 && g_interrupt_pipe[0] < 0 && pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) port = 0;
  if (port > 0) {
    struct sigaction action = {}, old = {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old);  // No SA_RESTART: a read at the prompt returns.
    std::fprintf(stderr, "launcher: chatting with %s; /reset clears the history, /exit leaves, Ctrl-C stops an "
                 "answer\n", options.model.c_str());
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(3600, 0);
    last_error = Converse(client, options, server);
    sigaction(SIGINT, &old, nullptr);
  }
  ASSIGN_OR_RETURN(JobOutcome outcome, server.Stop());
  if (outcome.failed_rank >= 0) {
    return absl::InternalError(absl::StrFormat("rank %d failed (%s); its log: %s", outcome.failed_rank,
                                               outcome.failed_exit.Describe(), outcome.failed_log));
  }
  if (port == 0) return absl::UnavailableError("the chat's server ended before it listened");
  // Aborted: the session ran, as a batch job with a prompt that could not
  // run, so 1 rather than 2 (base/exit_code.h).
  if (!last_error.empty()) return absl::AbortedError("the chat ended on a turn that failed: " + last_error);
  return absl::OkStatus();
}

}  // namespace llama
