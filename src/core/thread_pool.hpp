// A fixed set of worker threads that run index ranges. Work is handed out
// by index and results are written by index, so the outcome never depends
// on the number of threads or their timing.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chunkinv {

class ThreadPool {
 public:
  // 0: every hardware thread, or as many as the system lets it create.
  // A positive count that cannot be had (ulimit -u or -v) is a UsageError
  // naming it and how many could be created; the constructor never blocks.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(i) for every i in [0, n), the caller's thread taking part.
  // The first exception thrown by fn is rethrown here.
  void parallel_for(size_t n, const std::function<void(size_t)>& fn);

 private:
  void work();
  void stop();  // ends and joins every worker
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0, next_ = 0, active_ = 0;
  unsigned long generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace chunkinv
