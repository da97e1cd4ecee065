// The thread pool when the system will not give it every thread it asks
// for: a UsageError naming the count, never a hang or an abort.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "support/sanitizer.hpp"

using namespace chunkinv;

namespace {

// Bytes mapped by this process now (VmSize).
long long mapped_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  return -1;
}

}  // namespace

TEST(ThreadPool, ThreadsThatCannotBeCreatedAreAUsageErrorNotAHang) {
  // ASan reserves terabytes of shadow memory: an address-space limit
  // cannot be set under it.
  if (chunkinv::testing::kAddressSanitizer)
    GTEST_SKIP() << "needs an address-space limit, which AddressSanitizer cannot run under";
  const long long mapped = mapped_bytes();
  ASSERT_GT(mapped, 0);
  int pipe_fd[2];
  ASSERT_EQ(::pipe(pipe_fd), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fd[0]);
    ::alarm(60);  // a hang ends the child by SIGALRM, and the test fails
    // Room for a few dozen 8 MiB thread stacks, not for 10000.
    const rlimit rl{static_cast<rlim_t>(mapped + (256LL << 20)), static_cast<rlim_t>(mapped + (256LL << 20))};
    ::setrlimit(RLIMIT_AS, &rl);
    std::string msg = "no error";
    try {
      ThreadPool pool(10000);
      std::atomic<int> sum{0};
      pool.parallel_for(100, [&](size_t i) { sum += static_cast<int>(i); });
      msg = "created all 10000 threads";
    } catch (const UsageError& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      msg = std::string("other exception: ") + e.what();
    }
    // A pool of what it can get still works after the refusal.
    std::atomic<int> sum{0};
    ThreadPool(2).parallel_for(100, [&](size_t i) { sum += static_cast<int>(i); });
    if (sum != 4950) msg += "; the next pool computed a wrong sum";
    (void)!::write(pipe_fd[1], msg.data(), msg.size());
    ::close(pipe_fd[1]);
    ::_exit(0);
  }
  ::close(pipe_fd[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fd[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  ::close(pipe_fd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << " (14: a hang)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(msg.find("--threads 10000: only "), std::string::npos) << msg;
  EXPECT_NE(msg.find("threads could be created"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("wrong sum"), std::string::npos) << msg;
}

TEST(ThreadPool, EveryHardwareThreadIsTheDefault) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
  std::atomic<long> sum{0};
  pool.parallel_for(1000, [&](size_t i) { sum += static_cast<long>(i); });
  EXPECT_EQ(sum, 499500);
}
