// SIGINT and SIGTERM, caught for a supervision loop: the handler writes a
// byte to a pipe (async-signal-safe), which the loop polls with the
// workers' output. The old handlers come back when the catcher goes.

#ifndef LLAMA_LAUNCHER_SIGNAL_CATCHER_H_
#define LLAMA_LAUNCHER_SIGNAL_CATCHER_H_

#include <signal.h>

namespace llama {

class SignalCatcher {
 public:
  SignalCatcher(bool catch_sigint, bool catch_sigterm);
  ~SignalCatcher();
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  // The pipe's read end to poll; -1 (nothing to poll) when no signal is caught.
  int fd() const;
  // Number of signals received since the last call.
  int Drain();

 private:
  bool catch_sigint_, catch_sigterm_;
  struct sigaction old_int_ = {}, old_term_ = {};
};

}  // namespace llama

#endif  // LLAMA_LAUNCHER_SIGNAL_CATCHER_H_
