// How tools/train reports a run: a progress line per step (a redrawn bar with throughput,
// running loss and ETA on a terminal; a plain line every `plain_every` steps otherwise),
// one JSON object per epoch (--metrics), and the loss and accuracy curves as an SVG image
// a browser shows (--plot).
//
//   Progress bar(stderr, isatty(2), steps_per_epoch, epoch, epochs);
//   for (...) bar.update(step, examples_seen, running_loss);
//   bar.finish();
//   std::string line = epoch_json(record);                // {"epoch":1,"train_loss":...}
//   absl::Status s = write_plot_svg("curves.svg", records, step_losses);
//
// Thread-safety: a Progress belongs to one thread; the free functions are pure.
// Failure: write_plot_svg returns a Status naming the path when it cannot be written.
#ifndef STREAMGRAD_TOOLS_TRAIN_REPORT_H_
#define STREAMGRAD_TOOLS_TRAIN_REPORT_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace streamgrad {

// What one epoch measured.
struct EpochRecord {
  int epoch = 0;               // 1-based
  double train_loss = 0;       // mean over the epoch's batches
  double test_loss = 0;        // mean over the test set
  double test_accuracy = 0;    // in [0, 1]
  double examples_per_s = 0;   // training examples over the epoch's training wall time
  double seconds = 0;          // the epoch's wall time, evaluation included
  int64_t peak_memory_bytes = 0;  // peak allocated bytes of the epoch's training steps
  // Peak reserved bytes (allocated plus cached segments, and blocks freed but not yet
  // reusable) over the same steps: what the device had to hold.
  int64_t peak_reserved_bytes = 0;
  // Peak reserved pinned host memory over the same steps (--offload's copies, the
  // loader's pinned batches).
  int64_t peak_pinned_bytes = 0;
  double lr = 0;  // group 0's lr after the epoch's schedule step (get_last_lr())
};

class Progress {
 public:
  // `terminal`: redraw one line in place (\r) at most 10 times a second; otherwise print a
  // plain line every `plain_every` steps and at the end.
  Progress(std::FILE* out, bool terminal, int64_t steps, int epoch, int epochs,
           int64_t plain_every = 100);
  void update(int64_t step, int64_t examples, double running_loss);
  void finish();

 private:
  std::string line(int64_t step, int64_t examples, double running_loss) const;

  std::FILE* out_;
  bool terminal_;
  int64_t steps_;
  int epoch_, epochs_;
  int64_t plain_every_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t last_step_ = 0, last_examples_ = 0;
  double last_loss_ = 0;
  bool drawn_ = false;
};

// One line of --metrics: the record as a JSON object (no trailing newline). A value that
// is not finite (a diverged loss) is written as null, since JSON has no NaN.
std::string epoch_json(const EpochRecord& record);

// Two panels: training loss (per step, thin, and per epoch, with markers) and test
// accuracy per epoch. Axes are labelled with their ranges.
std::string plot_svg(const std::vector<EpochRecord>& epochs,
                     const std::vector<double>& step_losses);
absl::Status write_plot_svg(const std::string& path, const std::vector<EpochRecord>& epochs,
                            const std::vector<double>& step_losses);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_REPORT_H_
