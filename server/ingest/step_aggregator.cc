#include "server/ingest/step_aggregator.h"

#include <algorithm>
#include <cmath>

#include "common/stats.h"

namespace hetbench::server {

BatchSummary SummarizeBatch(const int64_t* start_ns, const int64_t* duration_ns, const int32_t* items, int n) {
  BatchSummarizer s;
  for (int i = 0; i < n; ++i) s.Add(start_ns[i], duration_ns[i], items[i]);
  return s.Finish();
}

void PhaseAccumulator::Add(const int64_t* start_ns, const int64_t* duration_ns, const int32_t* items, int n) {
  Add(SummarizeBatch(start_ns, duration_ns, items, n), duration_ns);
}

void PhaseAccumulator::Add(const BatchSummary& b, const int64_t* duration_ns) {
  const int n = b.n;
  if (n <= 0) return;
  if (count_ == 0) {
    min_ = b.min;
    max_ = b.max;
    first_start_ = b.first_start;
    last_end_ = b.last_end;
  } else {
    min_ = std::min(min_, b.min);
    max_ = std::max(max_, b.max);
    first_start_ = std::min(first_start_, b.first_start);
    last_end_ = std::max(last_end_, b.last_end);
  }
  // Merged mean and M2 (Chan et al.).
  const double na = static_cast<double>(count_), nb = n, nab = na + nb;
  const double batch_mean = b.sum / nb;
  const double delta = batch_mean - mean_;
  mean_ += delta * nb / nab;
  m2_ += b.m2 + delta * delta * na * nb / nab;
  count_ += n;
  items_ += b.items;
  total_ += b.sum;
  if (histogram_.empty()) {
    exact_.insert(exact_.end(), duration_ns, duration_ns + n);
    if (exact_.size() > exact_limit_) MoveToHistogram();
  } else {
    // Bucket is monotonic: the batch's largest value sizes the histogram
    // once, and the per-value loop only counts.
    const auto top = static_cast<size_t>(Bucket(b.max));
    if (top >= histogram_.size()) histogram_.resize(top + 1, 0);
    for (int i = 0; i < n; ++i) ++histogram_[static_cast<size_t>(Bucket(duration_ns[i]))];
  }
}

void PhaseAccumulator::Count(int64_t v) {
  const auto b = static_cast<size_t>(Bucket(v));
  if (b >= histogram_.size()) histogram_.resize(b + 1, 0);
  ++histogram_[b];
}

void PhaseAccumulator::MoveToHistogram() {
  histogram_.resize(1, 0);  // not empty: the histogram is in use from now on
  for (int64_t v : exact_) Count(v);
  exact_.clear();
  exact_.shrink_to_fit();
}

int32_t PhaseAccumulator::Bucket(int64_t v) {
  if (v < (int64_t{1} << kSubBucketBits)) return static_cast<int32_t>(std::max<int64_t>(v, 0));
  const int e = 63 - __builtin_clzll(static_cast<uint64_t>(v));  // 2^e <= v < 2^(e+1)
  const int shift = e - kSubBucketBits;
  const int64_t mantissa = v >> shift;  // in [2^bits, 2^(bits+1))
  return static_cast<int32_t>((shift + 1) << kSubBucketBits) + static_cast<int32_t>(mantissa - (1 << kSubBucketBits));
}

double PhaseAccumulator::BucketMid(int32_t b) {
  if (b < (1 << kSubBucketBits)) return b;
  const int shift = (b >> kSubBucketBits) - 1;
  const int64_t mantissa = (b & ((1 << kSubBucketBits) - 1)) + (1 << kSubBucketBits);
  const double lo = std::ldexp(static_cast<double>(mantissa), shift);
  return lo + std::ldexp(0.5, shift);
}

v1::TimingStats PhaseAccumulator::Finish() const {
  v1::TimingStats out;
  if (count_ == 0) return out;
  const double n = static_cast<double>(count_);
  out.set_count(count_);
  out.set_items(items_);
  out.set_mean_ns(mean_);
  out.set_stddev_ns(count_ > 1 ? std::sqrt(m2_ / (n - 1.0)) : 0.0);
  out.set_min_ns(static_cast<double>(min_));
  out.set_max_ns(static_cast<double>(max_));
  out.set_total_ns(total_);
  out.set_samples_per_second(total_ > 0 ? static_cast<double>(items_) / (total_ * 1e-9) : 0.0);
  out.set_window_seconds(static_cast<double>(last_end_ - first_start_) * 1e-9);
  const double qs[] = {0.25, 0.50, 0.75, 0.90, 0.99};
  double p[5];
  if (histogram_.empty()) {
    // Type-7 percentiles by selection, not a full sort: O(n) per percentile.
    std::vector<int64_t> v = exact_;
    auto kth = [&v](size_t k, size_t from) {
      std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(k),
                       v.end());
      return static_cast<double>(v[k]);
    };
    size_t from = 0;
    for (int i = 0; i < 5; ++i) {
      const double pos = qs[i] * (n - 1.0);
      const auto lo = static_cast<size_t>(std::floor(pos));
      const double a = kth(lo, from);
      double b = a;
      if (lo + 1 < v.size())
        b = static_cast<double>(*std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end()));
      p[i] = a + (b - a) * (pos - static_cast<double>(lo));
      from = lo;
    }
  } else {
    out.set_quantile_relative_error(kRelativeError);
    int i = 0;
    int64_t seen = 0;
    for (size_t bucket = 0; bucket < histogram_.size(); ++bucket) {
      seen += histogram_[bucket];
      while (i < 5 && static_cast<double>(seen) > qs[i] * (n - 1.0)) {
        p[i++] =
            std::clamp(BucketMid(static_cast<int32_t>(bucket)), static_cast<double>(min_), static_cast<double>(max_));
      }
    }
    while (i < 5) p[i++] = static_cast<double>(max_);
  }
  out.set_p25_ns(p[0]);
  out.set_p50_ns(p[1]);
  out.set_p75_ns(p[2]);
  out.set_p90_ns(p[3]);
  out.set_p99_ns(p[4]);
  out.set_iqr_ns(p[2] - p[0]);
  return out;
}

std::vector<int64_t> PhaseAccumulator::SortedExact() const {
  if (!histogram_.empty()) return {};
  std::vector<int64_t> v = exact_;
  std::sort(v.begin(), v.end());
  return v;
}

void TaskAggregate::Add(const v1::SampleBatch& batch) {
  // The edge checked the columns are of equal length.
  Add(batch, SummarizeBatch(batch.start_ns().data(), batch.duration_ns().data(), batch.items().data(),
                            batch.duration_ns_size()));
}

void TaskAggregate::Add(const v1::SampleBatch& batch, const BatchSummary& summary) {
  auto [it, added] = phases.try_emplace(batch.phase());
  const bool serving = batch.phase() == v1::PHASE_SERVE || batch.phase() == v1::PHASE_TTFT ||
                       batch.phase() == v1::PHASE_TPOT;  // percentiles from every value, exactly
  if (added && serving) it->second.set_exact_limit(PhaseAccumulator::kServeExactLimit);
  it->second.Add(summary, batch.duration_ns().data());
  ++batches_stored;
  samples_stored += batch.duration_ns_size();
}

}  // namespace hetbench::server
