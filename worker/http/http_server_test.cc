// The HTTP server over raw sockets, where the bytes matter: each limit
// answered with its status and flag name while the request is still being
// read, keep-alive and pipelining, streams (chunked, and HTTP/1.0's
// close-delimited), a client that leaves, the connection cap, and the
// exclusive port.

#include "worker/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"

namespace llama::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

// A blocking TCP client on 127.0.0.1 with read deadlines.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }

  // False once the server stopped taking bytes (it answered and closed).
  bool Send(const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += n;
    }
    return true;
  }
  // True if the server has sent something (or closed).
  bool Readable(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }
  // Reads until `until` has arrived, the server closes, or `timeout`.
  std::string ReadUntil(const std::string& until, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = Clock::now() + timeout;
    while (received_.find(until) == std::string::npos && !closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || !Readable(left)) break;
      char buffer[16384];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(buffer, n);
    }
    return received_;
  }
  std::string ReadToClose(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    ReadUntil("\x01\x02 never sent", timeout);
    return received_;
  }
  bool closed() const { return closed_; }
  void Forget() { received_.clear(); }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

// A server with an echo route, a route that streams three chunks, a route
// whose head check refuses, and an I/O-thread route.
class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(Limits limits = {}) {
    ServerOptions options;
    options.limits = limits;
    options.error_response = [](int status, const std::string& message, const std::string& code) {
      return Response{status, "application/json", absl::StrFormat(R"({"error":"%s","code":"%s"})", message, code), {}};
    };
    options.access_log = [this](const AccessRecord& record) {
      absl::MutexLock lock(&access_mutex_);
      access_.push_back(record);
    };
    server_ = std::make_unique<Server>(options);
    server_->Handle({"POST", "/echo", nullptr, [](std::shared_ptr<Exchange> e) {
                       e->Respond({200, "text/plain", absl::StrCat(e->request().target, ":", e->request().body), {}});
                     }});
    server_->Handle({"GET", "/ping", nullptr,
                     [](std::shared_ptr<Exchange> e) { e->Respond({200, "text/plain", e->request().target, {}}); },
                     /*on_io_thread=*/true});
    server_->Handle({"GET", "/stream", nullptr, [](std::shared_ptr<Exchange> e) {
                       e->StartStream(200, "text/event-stream");
                       for (const char* part : {"one ", "two ", "three"}) e->Send(part);
                       e->End();
                     }});
    server_->Handle({"POST", "/locked",
                     [](const Request& head) -> std::optional<Response> {
                       if (head.Header("Authorization") == "Bearer key") return std::nullopt;
                       return Response{401, "text/plain", "no key", {}};
                     },
                     [](std::shared_ptr<Exchange> e) { e->Respond({200, "text/plain", "opened", {}}); }});
    server_->Handle({"GET", "/forever", nullptr, [this](std::shared_ptr<Exchange> e) {
                       e->OnClientGone([this] { gone_.Notify(); });
                       e->StartStream(200, "text/event-stream");
                       e->Send("started");
                     }});
    ASSERT_TRUE(server_->Start().ok());
  }
  int port() const { return server_->port(); }

  // The access log's records once there are `count` (they are written
  // after the answer's last byte, so they may trail the client's read).
  std::vector<AccessRecord> AccessRecords(size_t count) {
    absl::MutexLock lock(&access_mutex_);
    const auto enough = [&] { return access_.size() >= count; };
    access_mutex_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(5));
    return access_;
  }

  // Before server_: the server's threads use them until it is destroyed
  // (connections closed at Stop are logged and reported gone too).
  absl::Notification gone_;
  absl::Mutex access_mutex_;
  std::vector<AccessRecord> access_;
  std::unique_ptr<Server> server_;
};

// One record per request, in order, with what the log may hold: the
// client, method, path without its query, status, answer bytes, duration;
// a client that leaves mid-answer is marked; an unreadable head is "-".
TEST_F(HttpServerTest, TheAccessLogHasOneLinePerRequestWithoutContents) {
  StartServer();
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("POST /echo?key=secret HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nprompt"
                       "GET /nowhere HTTP/1.0\r\n\r\n"));
    ASSERT_THAT(c.ReadToClose(), HasSubstr("no route"));
  }
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /bad\x01target HTTP/1.1\r\n\r\n"));
    ASSERT_THAT(c.ReadToClose(), HasSubstr("bad target"));
  }
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_THAT(c.ReadUntil("started"), HasSubstr("started"));
  }
  const std::vector<AccessRecord> records = AccessRecords(4);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].path, "/echo");
  EXPECT_EQ(records[0].status, 200);
  EXPECT_EQ(records[0].body_bytes, std::string("/echo?key=secret:prompt").size());
  EXPECT_TRUE(records[0].complete);
  EXPECT_THAT(records[0].remote, StartsWith("127.0.0.1:"));
  EXPECT_THAT(AccessLogLine(records[1]), HasSubstr("\"GET /nowhere HTTP/1.0\" 404 "));
  EXPECT_THAT(AccessLogLine(records[2]), HasSubstr("\"- - HTTP/1.1\" 400 "));
  EXPECT_EQ(records[3].path, "/forever");
  EXPECT_FALSE(records[3].complete);
  EXPECT_EQ(records[3].body_bytes, std::string("started").size());
  EXPECT_THAT(AccessLogLine(records[3]), HasSubstr(" (closed before the answer ended)"));
  for (const AccessRecord& r : records) EXPECT_THAT(AccessLogLine(r), Not(HasSubstr("prompt")));
}

// Whatever reaches a record, a line stays one line with its quotes intact.
TEST(AccessLogLineTest, EscapesWhatCouldForgeALine) {
  AccessRecord r{"[::1]:80", "GET", "/a\"b\nc", 11, 200, 5, absl::Milliseconds(1.25), true};
  EXPECT_EQ(AccessLogLine(r), "[::1]:80 \"GET /a\\\"b\\nc HTTP/1.1\" 200 5 B 1.2 ms");
}

TEST_F(HttpServerTest, KeepAliveWithoutARequestCapAndPipelinedAnswersInOrder) {
  StartServer();
  RawClient c(port());
  for (int i = 0; i < 20; ++i) {
    const std::string body = absl::StrCat("n", i);
    ASSERT_TRUE(c.Send(absl::StrCat("POST /echo?", i, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                                    "\r\n\r\n", body)));
    EXPECT_THAT(c.ReadUntil(absl::StrCat("/echo?", i, ":n", i)), HasSubstr(absl::StrCat("/echo?", i, ":n", i)));
    EXPECT_FALSE(c.closed()) << "closed after request " << i;
    c.Forget();
  }
  // Four requests in one write: four answers, in order.
  std::string pipelined;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&pipelined, "GET /ping?", i, " HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.Send(pipelined));
  const std::string answers = c.ReadUntil("/ping?3");
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t next = answers.find(absl::StrCat("/ping?", i), at);
    ASSERT_NE(next, std::string::npos) << "answer " << i << " missing or out of order in " << answers;
    at = next;
  }
}

TEST_F(HttpServerTest, HeaderBytesAndCountAreLimitedWhileReading) {
  Limits limits;
  limits.max_header_bytes = 8192;
  limits.max_headers = 20;
  StartServer(limits);
  {
    // Megabytes of header: refused once the limit is passed, not at the end.
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /ping HTTP/1.1\r\nHost: x\r\n"));
    const std::string line = absl::StrCat("X-Filler: ", std::string(1000, 'a'), "\r\n");
    for (int i = 0; i < 64 * 1024 && !c.Readable(); ++i) {
      if (!c.Send(line)) break;
    }
    const std::string reply = c.ReadUntil("}");
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 431"));
    EXPECT_THAT(reply, HasSubstr("larger than 8192 bytes (--max_header_bytes)"));
  }
  {
    RawClient c(port());
    std::string request = "GET /ping HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 30; ++i) absl::StrAppend(&request, "X-", i, ": 1\r\n");
    ASSERT_TRUE(c.Send(request + "\r\n"));
    const std::string reply = c.ReadUntil("}");
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 431"));
    EXPECT_THAT(reply, HasSubstr("31 header fields, more than 20 (--max_headers)"));
  }
}

TEST_F(HttpServerTest, BodiesAreLimitedChunkedOrNot) {
  Limits limits;
  limits.max_body_bytes = 64 << 10;
  StartServer(limits);
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk = absl::StrCat(absl::StrFormat("%x\r\n", 4096), std::string(4096, 'b'), "\r\n");
    int sent = 0;
    for (; sent < 16 * 1024 && !c.Readable(); ++sent) {  // Up to 64 MiB.
      if (!c.Send(chunk)) break;
    }
    const std::string reply = c.ReadUntil("}");
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 413"));
    EXPECT_THAT(reply, HasSubstr("larger than 65536 bytes (--max_body_bytes)"));
    EXPECT_LT(sent, 1024) << "the server read far past the limit before answering";
  }
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"));
    EXPECT_THAT(c.ReadUntil("}"), StartsWith("HTTP/1.1 413"));
  }
  {
    // A chunk-size line that never ends: Beast's parser bounds neither it
    // nor the trailer, the connection's read buffer does.
    RawClient c(port());
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;"));
    const std::string extension(4096, 'e');
    int sent = 0;
    for (; sent < 16 * 1024 && !c.Readable(); ++sent) {  // Up to 64 MiB.
      if (!c.Send(extension)) break;
    }
    EXPECT_THAT(c.ReadUntil("}"), StartsWith("HTTP/1.1 4"));
    EXPECT_LT(sent, 1024) << "the server buffered far past its limits";
  }
}

TEST_F(HttpServerTest, TheRequestDeadlineRunsFromTheFirstByteToTheLast) {
  Limits limits;
  limits.request_timeout = absl::Seconds(1);
  StartServer(limits);
  RawClient c(port());
  // One byte every 100 ms: each read succeeds, the request never ends.
  const std::string request = "GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100, 's');
  const auto start = Clock::now();
  for (char byte : request) {
    if (c.Readable() || !c.Send(std::string(1, byte))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string reply = c.ReadUntil("}", std::chrono::seconds(5));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 408"));
  EXPECT_THAT(reply, HasSubstr("within 1s (--request_timeout)"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
}

TEST_F(HttpServerTest, IdleConnectionsAreClosedAfterTheKeepAliveTimeout) {
  Limits limits;
  limits.keep_alive_timeout = absl::Milliseconds(300);
  StartServer(limits);
  RawClient c(port());
  ASSERT_TRUE(c.Send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(c.ReadUntil("/ping"), StartsWith("HTTP/1.1 200"));
  c.ReadToClose(std::chrono::seconds(5));
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpServerTest, PastTheConnectionCapNewConnectionsAreRefusedAtOnce) {
  Limits limits;
  limits.max_connections = 4;
  StartServer(limits);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(held.back()->Send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_THAT(held.back()->ReadUntil("/ping"), StartsWith("HTTP/1.1 200"));
  }
  RawClient over(port());
  const std::string reply = over.ReadToClose(std::chrono::seconds(5));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(reply, HasSubstr("4 connections, its limit (--max_connections)"));
  // Those held are served still; one closed makes room.
  held[0]->Forget();
  ASSERT_TRUE(held[0]->Send("GET /ping?again HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(held[0]->ReadUntil("/ping?again"), HasSubstr("/ping?again"));
  held.pop_back();
  for (int i = 0; i < 100 && server_->open_connections() > 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RawClient room(port());
  ASSERT_TRUE(room.Send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(room.ReadUntil("/ping"), StartsWith("HTTP/1.1 200"));
}

TEST_F(HttpServerTest, TheHeadCheckAnswersBeforeTheBodyIsRead) {
  StartServer();
  RawClient c(port());
  // A body of 8 MiB is announced and never sent: the refusal does not wait for it.
  ASSERT_TRUE(c.Send("POST /locked HTTP/1.1\r\nHost: x\r\nContent-Length: 8000000\r\n\r\n"));
  const std::string reply = c.ReadUntil("no key", std::chrono::seconds(2));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(reply, HasSubstr("Connection: close"));
  RawClient ok(port());
  ASSERT_TRUE(ok.Send("POST /locked HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key\r\nContent-Length: 2\r\n\r\nhi"));
  EXPECT_THAT(ok.ReadUntil("opened"), HasSubstr("opened"));
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  StartServer();
  RawClient c(port());
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  EXPECT_THAT(c.ReadUntil("\r\n\r\n"), StartsWith("HTTP/1.1 100 Continue\r\n\r\n"));
  ASSERT_TRUE(c.Send("body"));
  EXPECT_THAT(c.ReadUntil("/echo:body"), HasSubstr("HTTP/1.1 200"));
}

TEST_F(HttpServerTest, StreamsAreChunkedForHttp11AndCloseDelimitedForHttp10) {
  StartServer();
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string reply = c.ReadUntil("three\r\n0\r\n\r\n");
    EXPECT_THAT(reply, HasSubstr("Transfer-Encoding: chunked"));
    // Exactly these chunks after the head, and one last chunk.
    EXPECT_EQ(reply.substr(reply.find("\r\n\r\n") + 4), "4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n");
    EXPECT_FALSE(c.closed());
  }
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /stream HTTP/1.0\r\n\r\n"));
    const std::string reply = c.ReadToClose();
    EXPECT_TRUE(c.closed());
    EXPECT_THAT(reply, StartsWith("HTTP/1.0 200"));
    EXPECT_THAT(reply, ::testing::Not(HasSubstr("chunked")));
    EXPECT_THAT(reply, ::testing::EndsWith("\r\n\r\none two three"));
  }
}

TEST_F(HttpServerTest, AClientThatLeavesIsReported) {
  StartServer();
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_THAT(c.ReadUntil("started"), HasSubstr("started"));
  }
  EXPECT_TRUE(gone_.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST_F(HttpServerTest, SlowAndIdleClientsDoNotDelayOthers) {
  StartServer();
  std::vector<std::unique_ptr<RawClient>> idle, slow;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawClient>(port()));
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(slow.back()->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Le"));
  }
  RawClient c(port());
  ASSERT_TRUE(c.Send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(c.ReadUntil("/ping", std::chrono::seconds(2)), StartsWith("HTTP/1.1 200"));
  EXPECT_GE(server_->open_connections(), 265);
}

TEST_F(HttpServerTest, UnknownRoutesAndGarbageGetErrorsInTheGivenShape) {
  StartServer();
  RawClient c(port());
  ASSERT_TRUE(c.Send("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string reply = c.ReadUntil("}");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(reply, HasSubstr(R"({"error":"no route for GET /nowhere","code":"not_found"})"));
  RawClient garbage(port());
  ASSERT_TRUE(garbage.Send("\x16\x03\x01\x02\x00 \xff\xfe not http\r\n\r\n"));
  EXPECT_THAT(garbage.ReadUntil("}"), StartsWith("HTTP/1.1 400"));
}

TEST(HttpServerStartTest, AHostThatDoesNotResolveIsNamed) {
  ServerOptions options;
  options.host = "no.such.host.invalid";
  Server server(options);
  const absl::Status status = server.Start();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("cannot listen on no.such.host.invalid:0: --host does not resolve"));
}

TEST_F(HttpServerTest, ASecondServerOnTheSamePortFailsNamingIt) {
  StartServer();
  ServerOptions options;
  options.port = port();
  Server second(options);
  const absl::Status status = second.Start();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("127.0.0.1:", port())));
}

}  // namespace
}  // namespace llama::http
