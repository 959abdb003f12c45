// The cases of bench/sg_bench (streamgrad's side of the side-by-side benchmark), one
// function each; every function runs its warm-up and timed repetitions and fills the
// report (bench/bench_common.h). sg_bench.cc: the tiny-op graphs; sg_bench_nn.cc: the
// mlp (with layers and by hand) and cnn steps, the stream-overlap graph and layer_norm.
//
// Thread-safety: call from one thread. Failure: streamgrad errors propagate (main
// reports them and exits 1).
#ifndef STREAMGRAD_BENCH_SG_BENCH_H_
#define STREAMGRAD_BENCH_SG_BENCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "bench/bench_report.h"
#include "streamgrad.h"

namespace streamgrad {
namespace bench {

// Nodes reachable from `root` by type, each counted once (AccumulateGrad included).
std::map<std::string, int64_t> census(const std::shared_ptr<Node>& root);
int64_t count_nodes(const std::shared_ptr<Node>& root);

void run_chain(const Flags& f, Report& r);
void run_fanin(const Flags& f, Report& r);
void run_dag(const Flags& f, Report& r);
void run_retain(const Flags& f, Report& r);
void run_mlp(const Flags& f, Report& r);
void run_mlp_hand(const Flags& f, Report& r);
void run_cnn(const Flags& f, Report& r);
void run_resnet(const Flags& f, Report& r);
void run_overlap(const Flags& f, Report& r);
void run_math(const Flags& f, Report& r);
void run_gpt(const Flags& f, Report& r);        // sg_bench_gpt.cc
void run_attention(const Flags& f, Report& r);  // sg_bench_gpt.cc
void run_layer_norm(const Flags& f, Report& r);
void run_batch_norm(const Flags& f, Report& r);

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_SG_BENCH_H_
