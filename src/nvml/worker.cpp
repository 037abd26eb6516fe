#include "nvml/worker.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace gpud::nvml {

namespace {

using SteadyClock = std::chrono::steady_clock;

enum class JobState { kQueued, kRunning, kDone, kAbandoned };

struct Job {
  std::function<void()> fn;
  SteadyClock::time_point deadline;
  JobState state = JobState::kQueued;
};

}  // namespace

// Shared by the Worker and its thread, so a detached (stuck) thread never touches a freed Worker.
struct Worker::State {
  std::mutex mu;
  std::condition_variable cv;       // wakes the worker thread
  std::condition_variable done_cv;  // wakes callers and stop()
  std::deque<std::shared_ptr<Job>> queue;
  std::shared_ptr<Job> running;
  bool stopping = false;
  bool exited = false;
  std::thread thread;

  // Caller holds mu. A call is stuck when it runs past its deadline.
  bool stuck_locked(SteadyClock::time_point now) const {
    return running && running->state == JobState::kRunning && now > running->deadline;
  }

  // Caller holds mu: once the worker is known stuck, queued callers fail now instead of waiting.
  void abandon_queued_locked() {
    for (auto& j : queue) j->state = JobState::kAbandoned;
    queue.clear();
    done_cv.notify_all();
  }

  static void loop(const std::shared_ptr<State>& self) {
    std::unique_lock lock(self->mu);
    while (true) {
      self->cv.wait(lock, [&] { return self->stopping || !self->queue.empty(); });
      if (self->queue.empty()) break;  // stopping with nothing left
      auto job = std::move(self->queue.front());
      self->queue.pop_front();
      if (job->state != JobState::kQueued) continue;
      if (SteadyClock::now() > job->deadline) {
        job->state = JobState::kAbandoned;
        self->done_cv.notify_all();
        continue;
      }
      job->state = JobState::kRunning;
      self->running = job;
      lock.unlock();
      job->fn();
      // Destroy the closure here, outside the lock: it may hold the last reference to the NVML
      // library, whose release must not happen while we are inside one of its calls.
      auto fn = std::move(job->fn);
      fn = nullptr;
      lock.lock();
      job->state = JobState::kDone;
      self->running.reset();
      self->done_cv.notify_all();
    }
    self->exited = true;
    self->done_cv.notify_all();
  }
};

bool is_timeout(const Error& e) { return e.code == kTimeoutErrorCode; }

Worker::Worker(std::string name) : state_(std::make_shared<State>()) {
  auto st = state_;
  state_->thread = std::thread([st] { State::loop(st); });
  std::string short_name = name.substr(0, 15);  // the kernel limit for thread names
  pthread_setname_np(state_->thread.native_handle(), short_name.c_str());
}

Worker::~Worker() { stop(); }

Result<void> Worker::run(std::function<void()> job, std::chrono::milliseconds deadline) {
  auto j = std::make_shared<Job>();
  j->fn = std::move(job);
  j->deadline = SteadyClock::now() + deadline;
  std::unique_lock lock(state_->mu);
  if (state_->stopping) return make_error("NVML worker stopped");
  if (state_->stuck_locked(SteadyClock::now())) {
    return make_error(kTimeoutMessage, kTimeoutErrorCode);
  }
  state_->queue.push_back(j);
  state_->cv.notify_one();
  // stop() ends the wait too: a caller waiting on a stuck call is not held for its deadline.
  bool finished = state_->done_cv.wait_until(lock, j->deadline, [&] {
    return j->state == JobState::kDone || j->state == JobState::kAbandoned || state_->stopping;
  });
  if (finished && j->state == JobState::kDone) return {};
  if (state_->stopping) {
    if (j->state == JobState::kQueued) j->state = JobState::kAbandoned;
    return make_error("NVML worker stopped");
  }
  if (j->state == JobState::kQueued) {
    j->state = JobState::kAbandoned;  // the worker skips it
  } else if (j->state == JobState::kRunning) {
    state_->abandon_queued_locked();
  }
  if (j->state == JobState::kAbandoned && state_->stopping)
    return make_error("NVML worker stopped");
  return make_error(kTimeoutMessage, kTimeoutErrorCode);
}

bool Worker::stuck() const {
  std::lock_guard lock(state_->mu);
  return state_->stuck_locked(SteadyClock::now());
}

bool Worker::stop(std::chrono::milliseconds grace) {
  std::unique_lock lock(state_->mu);
  if (!state_->thread.joinable()) return true;
  state_->stopping = true;
  for (auto& j : state_->queue) j->state = JobState::kAbandoned;
  state_->queue.clear();
  state_->cv.notify_all();
  state_->done_cv.notify_all();
  bool exited = state_->done_cv.wait_for(lock, grace, [&] { return state_->exited; });
  std::thread t = std::move(state_->thread);
  lock.unlock();
  if (exited) {
    t.join();
    return true;
  }
  t.detach();  // stuck in a driver call: let it finish (or not) on its own
  return false;
}

}  // namespace gpud::nvml
