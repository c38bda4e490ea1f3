#include "launcher/signal_catcher.h"

#include <fcntl.h>
#include <unistd.h>

namespace llama {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int) {
  const char byte = 1;
  const ssize_t ignored = write(g_signal_pipe[1], &byte, 1);
  (void)ignored;
}

}  // namespace

SignalCatcher::SignalCatcher(bool catch_sigint, bool catch_sigterm)
    : catch_sigint_(catch_sigint), catch_sigterm_(catch_sigterm) {
  if (!catch_sigint_ && !catch_sigterm_) return;
  if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  if (catch_sigint_) sigaction(SIGINT, &action, &old_int_);
  if (catch_sigterm_) sigaction(SIGTERM, &action, &old_term_);
}

SignalCatcher::~SignalCatcher() {
  if (catch_sigint_) sigaction(SIGINT, &old_int_, nullptr);
  if (catch_sigterm_) sigaction(SIGTERM, &old_term_, nullptr);
}

int SignalCatcher::fd() const { return catch_sigint_ || catch_sigterm_ ? g_signal_pipe[0] : -1; }

int SignalCatcher::Drain() {
  if (fd() < 0) return 0;
  char buffer[64];
  int count = 0;
  ssize_t n;
  while ((n = read(g_signal_pipe[0], buffer, sizeof buffer)) > 0) count += n;
  return count;
}

}  // namespace llama
