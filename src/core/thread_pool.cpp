#include "core/thread_pool.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "core/error.hpp"

namespace chunkinv {

ThreadPool::ThreadPool(int threads) {
  const bool every = threads <= 0;
  if (every) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int t = 1; t < threads; ++t) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc for its state
      // Out of threads or address space (ulimit -u, -v). The workers made
      // so far wait on cv_: stop them before this object goes away.
      if (every) return;  // "all cores": run with those that could be made
      stop();
      throw UsageError(fmt::format("--threads {}: only {} threads could be created ({}); ask for fewer", threads,
                                   workers_.size() + 1, e.what()));
    }
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
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
