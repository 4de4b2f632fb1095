#include "server/ingest/batch_writer.h"

#include <pthread.h>

#include "common/log.h"

namespace hetbench::server {

BatchWriter::BatchWriter(std::unique_ptr<JobStore> connection, Post post)
    : store_(std::move(connection)), post_(std::move(post)), thread_([this] { Run(); }) {}

BatchWriter::~BatchWriter() { Stop(); }

void BatchWriter::Write(std::shared_ptr<const v1::SampleBatch> batch, Then then) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(Item{std::move(batch), nullptr, std::move(then)});
  }
  cv_.notify_one();
}

void BatchWriter::Write(std::shared_ptr<const v1::PowerBatch> batch, Then then) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(Item{nullptr, std::move(batch), std::move(then)});
  }
  cv_.notify_one();
}

void BatchWriter::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BatchWriter::Run() {
  pthread_setname_np(pthread_self(), "hb-batch-writer");
  std::vector<Item> items;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return !queue_.empty() || stop_; });
      items.swap(queue_);
      stopping = stop_;
    }
    if (!items.empty()) {
      // One transaction for everything queued (group commit).
      auto results = std::make_shared<std::vector<absl::StatusOr<bool>>>();
      results->reserve(items.size());
      absl::Status txn = store_->Begin();
      if (txn.ok()) {
        // The sample batches together (one round trip on PostgreSQL), then
        // each power batch; the results in the items' order.
        std::vector<const v1::SampleBatch*> samples;
        for (const Item& item : items) {
          if (item.samples) samples.push_back(item.samples.get());
        }
        std::vector<absl::StatusOr<bool>> stored = store_->PutSampleBatches(samples);
        size_t next = 0;
        for (const Item& item : items) {
          results->push_back(item.samples ? std::move(stored[next++]) : store_->PutPowerBatch(*item.power));
        }
      }
      if (txn.ok()) txn = store_->Commit();
      if (!txn.ok()) {
        LogError("batch-writer", "storing ", items.size(), " batches: ", txn.ToString(),
                 " (not acknowledged: the agents send them again)");
        (void)store_->Rollback();
        results->assign(items.size(), txn);
      }
      auto thens = std::make_shared<std::vector<Then>>();
      thens->reserve(items.size());
      for (Item& item : items) thens->push_back(std::move(item.then));
      items.clear();
      // Not posted once the loop stops: nothing is acknowledged then, and the
      // agents send those batches again (stored once by their key).
      post_([thens, results] {
        for (size_t i = 0; i < thens->size(); ++i) (*thens)[i]((*results)[i]);
      });
    }
    if (stopping) break;
  }
}

}  // namespace hetbench::server
