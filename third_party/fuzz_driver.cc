// A bounded, deterministic stand-in for libFuzzer's main(), so every fuzz
// target also runs as an ordinary test in CI (any compiler, no clang
// runtime): it feeds the seed files given on the command line, then random
// mutations of them (bit flips, byte overwrites, truncations, insertions,
// splices), for --fuzz_seconds. A crash, a sanitizer report or an escaped
// exception fails the test, and the input that did it is written where the
// developer finds it (the test's undeclared outputs: bazel-testlogs/<target>/
// test.outputs/, or ./fuzz-crash-input outside Bazel). Each run draws a new
// seed unless --fuzz_seed is given, and prints it. Real coverage-guided
// fuzzing uses the same targets with `--config=libfuzzer` (see
// third_party/README.md).

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gflags/gflags.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

DEFINE_double(fuzz_seconds, 5, "How long to run mutations after the seeds.");
DEFINE_uint64(fuzz_seed, 0, "Random seed for the mutations; 0: a fresh one, printed (rerun with it to reproduce).");

// Under AddressSanitizer: abort on a report, so the crash handler below
// keeps the input (ASan would otherwise _exit without signals).
extern "C" const char* __asan_default_options() { return "abort_on_error=1"; }

namespace {

// The input being run, for the crash handler: written with write(2) only.
const std::vector<uint8_t>* g_current = nullptr;
char g_crash_path[4096];

void SaveInputAndDie(int signal) {
  if (g_current != nullptr) {
    const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      if (::write(fd, g_current->data(), g_current->size()) < 0) {
      }
      ::close(fd);
    }
    static const char kSaved[] = "fuzz driver: the failing input is in ";
    if (::write(2, kSaved, sizeof kSaved - 1) < 0 || ::write(2, g_crash_path, std::strlen(g_crash_path)) < 0 ||
        ::write(2, "\n", 1) < 0) {
    }
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void InstallCrashHandler() {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s/fuzz-crash-input", dir != nullptr ? dir : ".");
  if (dir != nullptr) {
    std::printf("fuzz driver: a failing input is kept as fuzz-crash-input in "
                "bazel-testlogs/<package>/<target>/test.outputs/outputs.zip\n");
  }
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(signal, SaveInputAndDie);
}

std::vector<uint8_t> Mutate(const std::vector<std::vector<uint8_t>>& seeds, std::mt19937_64& rng) {
  std::vector<uint8_t> data = seeds[rng() % seeds.size()];
  const int edits = 1 + rng() % 8;
  for (int e = 0; e < edits; ++e) {
    if (data.empty()) data.push_back(static_cast<uint8_t>(rng()));
    // Headers and trailers (zip directories, pickles, shard headers and
    // footers) matter more than bulk tensor bytes: aim there half the time.
    size_t at = rng() % data.size();
    if (rng() % 2 == 0) {
      const size_t window = std::min<size_t>(data.size(), 4096);
      at = rng() % 2 == 0 ? rng() % window : data.size() - 1 - rng() % window;
    }
    switch (rng() % 6) {
      case 0:
        data[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        data[at] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // An interesting value: 0, 0xFF.., small ints.
        static constexpr uint8_t kValues[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x10};
        data[at] = kValues[rng() % sizeof kValues];
        break;
      }
      case 3:
        data.resize(at);
        break;
      case 4:
        data.insert(data.begin() + at, static_cast<uint8_t>(rng()));
        break;
      case 5: {  // Splice a piece of another seed.
        const std::vector<uint8_t>& other = seeds[rng() % seeds.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size();
        const size_t length = std::min<size_t>(other.size() - from, 1 + rng() % 64);
        data.insert(data.begin() + at, other.begin() + from, other.begin() + from + length);
        break;
      }
    }
  }
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "fuzz driver: cannot read seed %s\n", argv[i]);
      return 2;
    }
    seeds.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  if (seeds.empty()) seeds.emplace_back();
  InstallCrashHandler();
  for (const std::vector<uint8_t>& seed : seeds) {
    g_current = &seed;
    LLVMFuzzerTestOneInput(seed.data(), seed.size());
  }
  const uint64_t fuzz_seed = FLAGS_fuzz_seed != 0 ? FLAGS_fuzz_seed : std::random_device()() | 1;
  std::printf("fuzz driver: seed %llu (reproduce with --fuzz_seed=%llu)\n", static_cast<unsigned long long>(fuzz_seed),
              static_cast<unsigned long long>(fuzz_seed));
  std::fflush(stdout);
  std::mt19937_64 rng(fuzz_seed);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(FLAGS_fuzz_seconds);
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<uint8_t> input = Mutate(seeds, rng);
    g_current = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
  }
  g_current = nullptr;
  std::printf("fuzz driver: %zu seeds, %llu mutated inputs in %.1f s, no crash\n", seeds.size(),
              static_cast<unsigned long long>(runs), FLAGS_fuzz_seconds);
  return 0;
}
