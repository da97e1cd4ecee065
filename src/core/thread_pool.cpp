#include "core/thread_pool.hpp"

#include <algorithm>

namespace chunkinv {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work() {
  unsigned long seen = 0;
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    ++active_;
    while (next_ < n_) {
      const size_t i = next_++;
      lk.unlock();
      try {
        (*fn_)(i);
      } catch (...) {
        lk.lock();
        if (!error_) error_ = std::current_exception();
        next_ = n_;
        lk.unlock();
      }
      lk.lock();
    }
    if (--active_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  std::unique_lock lk(mu_);
  fn_ = &fn;
  n_ = n;
  next_ = 0;
  error_ = nullptr;
  ++generation_;
  cv_.notify_all();
  ++active_;
  while (next_ < n_) {
    const size_t i = next_++;
    lk.unlock();
    try {
      fn(i);
    } catch (...) {
      lk.lock();
      if (!error_) error_ = std::current_exception();
      next_ = n_;
      lk.unlock();
    }
    lk.lock();
  }
  --active_;
  done_cv_.wait(lk, [&] { return active_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace chunkinv
