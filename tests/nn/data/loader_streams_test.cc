// The data loader's stream contract (loader.h, ARCHITECTURE.md §9), shown on sim:0:
//  - overlap, read from a trace: the copy of batch k+1 runs on the copy stream while the
//    compute stream is still busy with batch k (the threaded scheduler, so streams really
//    run at once), and each batch's compute starts only after its copy ended, behind a
//    flow arrow copy stream -> compute stream;
//  - the hand-off is what makes it safe: with the wait left out on purpose
//    (unsafe_skip_copy_wait) the stream sanitizer reports the compute stream reading the
//    batch unordered after the copy's write, and the adversarial scheduler makes the read
//    see memory the copy has not written yet; with the wait, neither happens.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "nlohmann/json.hpp"
#include "nn/data/loader.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using nlohmann::json;

// Example i is [i, i, i, i], label i % 10.
class Ramp : public nn::Dataset {
 public:
  explicit Ramp(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Shape example_shape() const override { return {4}; }
  void get(int64_t i, float* d, int64_t* t) const override {
    for (int k = 0; k < 4; ++k) d[k] = static_cast<float>(i);
    *t = i % 10;
  }

 private:
  int64_t n_;
};

struct Lanes {
  json doc;
  int pid = -1;  // sim:0
  // Spans (ph X, not event marks) on stream `s`, in start order.
  std::vector<json> spans_on(const Stream& s) const {
    std::vector<json> out;
    for (const json& e : doc.at("traceEvents")) {
      if (e.at("ph") == "X" && e.value("cat", "") != "event" && e.at("pid") == pid &&
          e.at("tid") == s.id()) {
        out.push_back(e);
      }
    }
    std::sort(out.begin(), out.end(),
              [](const json& a, const json& b) { return a.at("ts") < b.at("ts"); });
    return out;
  }
  int flows(const Stream& from, const Stream& to) const {
    std::map<int64_t, int> starts;
    for (const json& e : doc.at("traceEvents")) {
      if (e.at("ph") == "s" && e.at("pid") == pid && e.at("tid") == from.id()) ++starts[e.at("id")];
    }
    int n = 0;
    for (const json& e : doc.at("traceEvents")) {
      if (e.at("ph") == "f" && e.at("pid") == pid && e.at("tid") == to.id()) {
        n += starts.count(e.at("id").get<int64_t>());
      }
    }
    return n;
  }
};

double start_of(const json& span) { return span.at("ts").get<double>(); }
// Times carry three decimals: the end is taken a little early, the start a little late,
// so that every "before" below is conservative.
double end_of(const json& span) {
  return span.at("ts").get<double>() + span.at("dur").get<double>() - 2e-3;
}

TEST_CASE("batch k+1 is copied on the copy stream while batch k computes", "[data][loader][trace]") {
  constexpr int kBatches = 5;
  // Long against a 64-byte copy and against the loader's worker collating the next batch,
  // also under TSan with the CPUs shared: at 30 ms, batch 1's copy once started 6 ms
  // after batch 0's compute ended there.
  constexpr double kComputeUs = 100000;
  SimSchedulerScope threaded({SimSchedulerKind::kThreaded, SimPolicy::kRoundRobin, 0, 0});
  const Device d("sim:0");
  const Stream compute = Stream::create(d);
  StreamGuard on_compute(compute);
  nn::DataLoader loader(std::make_shared<Ramp>(4 * kBatches),
                        nn::DataLoaderOptions().batch_size(4).shuffle(false).prefetch(1).device(d));
  TraceRecorder trace;
  loader.start_epoch(0);
  std::vector<float> sums;
  std::vector<Tensor> results;
  for (nn::Batch b; loader.next(&b);) {
    // "Compute": a long kernel, then a read of the batch (ordered after its copy).
    sleep(compute, kComputeUs);
    results.push_back(sum(b.data));
  }
  synchronize(d);
  trace.stop();
  for (const Tensor& r : results) sums.push_back(r.item<float>());
  REQUIRE(sums.size() == kBatches);
  for (int k = 0; k < kBatches; ++k) CHECK(sums[k] == 4.0f * (16 * k + 6));  // 4 * sum(4k..4k+3)

  Lanes t;
  t.doc = json::parse(trace.chrome_json());
  for (const json& e : t.doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("args").at("name") == "sim:0") {
      t.pid = e.at("pid");
    }
  }
  REQUIRE(t.pid >= 0);
  CHECK(t.doc.at("otherData").at("incomplete_spans") == 0);
  const Stream& copy = loader.copy_stream();
  REQUIRE(copy != compute);
  // Two copies per batch (data, then target) on the copy stream; on the compute stream a
  // sleep then the read (sum) per batch.
  const std::vector<json> copies = t.spans_on(copy);
  std::vector<json> sleeps, reads;
  for (const json& s : t.spans_on(compute)) (s.at("name") == "sleep" ? sleeps : reads).push_back(s);
  REQUIRE(copies.size() == 2 * kBatches);
  REQUIRE(sleeps.size() == kBatches);
  REQUIRE(reads.size() >= kBatches);
  for (int k = 0; k + 1 < kBatches; ++k) {
    INFO("batch " << k);
    const json& next_copy = copies[2 * (k + 1)];
    // Overlap: the next batch's copy started, and ended, while this batch computed.
    CHECK(start_of(next_copy) < end_of(sleeps[k]));
    CHECK(end_of(copies[2 * (k + 1) + 1]) < end_of(sleeps[k]));
  }
  // Safety: batch k's first read starts after both its copies ended.
  size_t r = 0;
  for (int k = 0; k < kBatches; ++k) {
    while (r < reads.size() && start_of(reads[r]) < start_of(sleeps[k])) ++r;
    REQUIRE(r < reads.size());
    CHECK(start_of(reads[r]) >= end_of(copies[2 * k + 1]));
  }
  // One hand-off per batch: a record on the copy stream, a wait on the compute stream.
  CHECK(t.flows(copy, compute) >= kBatches);
}

// Reads every batch on the compute stream under the adversarial scheduler: the loader's
// copy, enqueued before the read, runs as late as the ordering rules allow.
struct Consumed {
  std::vector<float> firsts;  // data[0][0] of each batch as read on the compute stream
  size_t findings = 0;
};

Consumed consume(bool skip_wait) {
  SimSchedulerScope adversarial({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, 3, 0});
  const Device d("sim:0");
  const Stream compute = Stream::create(d);
  StreamGuard on_compute(compute);
  Consumed out;
  nn::DataLoader loader(std::make_shared<Ramp>(12), nn::DataLoaderOptions()
                                                         .batch_size(4)
                                                         .shuffle(false)
                                                         .device(d)
                                                         .unsafe_skip_copy_wait(skip_wait));
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  std::vector<Tensor> copies;
  loader.start_epoch(0);
  for (nn::Batch b; loader.next(&b);) {
    // A scratch buffer filled on compute, then the batch copied over it on compute: the
    // copy's read of the batch is what must be ordered after the loader's write.
    Tensor seen = full({4, 4}, -1.0f, TensorOptions().device(d));
    copy_(seen, b.data);
    copies.push_back(seen);
  }
  for (const Tensor& c : copies) out.firsts.push_back(c.to_vector<float>()[0]);
  const std::vector<SanitizerFinding> findings = san.findings();
  out.findings = findings.size();
  if (skip_wait && out.findings > 0) {
    const SanitizerFinding& f = findings.front();
    CHECK(f.current.stream == compute);
    CHECK(f.previous.stream == loader.copy_stream());
    CHECK(f.previous.write);
  }
  return out;
}

TEST_CASE("the compute stream's wait on the copy is what makes batches safe", "[data][loader][S8]") {
  const Consumed safe = consume(/*skip_wait=*/false);
  CHECK(safe.findings == 0);
  CHECK(safe.firsts == std::vector<float>{0, 4, 8});
  Consumed unsafe;
  {
    SanitizerSuppression on_purpose;  // CI may run with the process-wide sanitizer on
    unsafe = consume(/*skip_wait=*/true);
  }
  CHECK(unsafe.findings > 0);
  CHECK(unsafe.firsts != std::vector<float>{0, 4, 8});  // read before the copy wrote it
}

}  // namespace
}  // namespace streamgrad
