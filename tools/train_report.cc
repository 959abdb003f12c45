#include "tools/train_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace streamgrad {
namespace {

using Clock = std::chrono::steady_clock;

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%02d:%02d", s / 60, s % 60);
}

}  // namespace

Progress::Progress(std::FILE* out, bool terminal, int64_t steps, int epoch, int epochs,
                   int64_t plain_every)
    : out_(out),
      terminal_(terminal),
      steps_(std::max<int64_t>(steps, 1)),
      epoch_(epoch),
      epochs_(epochs),
      plain_every_(std::max<int64_t>(plain_every, 1)),
      start_(Clock::now()),
      last_draw_(start_) {}

std::string Progress::line(int64_t step, int64_t examples, double running_loss) const {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? examples / elapsed : 0;
  const double eta = step > 0 ? elapsed * (steps_ - step) / step : NAN;
  std::string bar;
  if (terminal_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * std::min<int64_t>(step, steps_) / steps_);
    bar = absl::StrCat("[", std::string(filled, '#'), std::string(kWidth - filled, '.'), "] ");
  }
  return absl::StrFormat("epoch %d/%d %s%d/%d  loss %.4f  %.0f ex/s  elapsed %s  eta %s",
                         epoch_, epochs_, bar, step, steps_, running_loss, rate,
                         duration_text(elapsed), duration_text(eta));
}

void Progress::update(int64_t step, int64_t examples, double running_loss) {
  last_step_ = step;
  last_examples_ = examples;
  last_loss_ = running_loss;
  const Clock::time_point now = Clock::now();
  if (terminal_) {
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    std::fprintf(out_, "\r%s\033[K", line(step, examples, running_loss).c_str());
  } else {
    if (step % plain_every_ != 0) return;
    std::fprintf(out_, "%s\n", line(step, examples, running_loss).c_str());
  }
  std::fflush(out_);
  last_draw_ = now;
  drawn_ = true;
}

void Progress::finish() {
  const std::string last = line(last_step_, last_examples_, last_loss_);
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K\n", last.c_str());
  } else if (last_step_ % plain_every_ != 0) {
    std::fprintf(out_, "%s\n", last.c_str());
  }
  std::fflush(out_);
}

std::string epoch_json(const EpochRecord& r) {
  nlohmann::ordered_json j;
  j["epoch"] = r.epoch;
  j["train_loss"] = r.train_loss;
  j["test_loss"] = r.test_loss;
  j["test_accuracy"] = r.test_accuracy;
  j["examples_per_s"] = r.examples_per_s;
  j["seconds"] = r.seconds;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  j["peak_pinned_bytes"] = r.peak_pinned_bytes;
  j["lr"] = r.lr;
  return j.dump();
}

namespace {

// One panel: a plot area at (x0, y0) of size w x h with its frame, gridlines, tick labels
// and title; map() turns data coordinates into pixels.
struct Panel {
  double x0, y0, w, h;
  double xmin, xmax, ymin, ymax;
  double px(double x) const { return x0 + (x - xmin) / (xmax - xmin) * w; }
  double py(double y) const { return y0 + h - (y - ymin) / (ymax - ymin) * h; }
};

void widen(double& lo, double& hi) {
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
}

std::string axes(const Panel& p, const std::string& title, const std::string& xlabel,
                 int decimals) {
  std::string s = absl::StrFormat(
      "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#444'/>\n", p.x0,
      p.y0, p.w, p.h);
  for (int i = 0; i <= 4; ++i) {
    const double y = p.ymin + (p.ymax - p.ymin) * i / 4;
    absl::StrAppendFormat(&s,
                          "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n"
                          "<text x='%.1f' y='%.1f' text-anchor='end' font-size='11'>%.*f</text>\n",
                          p.x0, p.py(y), p.x0 + p.w, p.py(y), p.x0 - 4, p.py(y) + 4, decimals, y);
  }
  absl::StrAppendFormat(&s,
                        "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='11'>%g</text>\n"
                        "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='11'>%g</text>\n"
                        "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='12'>%s</text>\n"
                        "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='14' "
                        "font-weight='bold'>%s</text>\n",
                        p.x0, p.y0 + p.h + 14, p.xmin, p.x0 + p.w, p.y0 + p.h + 14, p.xmax,
                        p.x0 + p.w / 2, p.y0 + p.h + 30, xlabel, p.x0 + p.w / 2, p.y0 - 10,
                        title);
  return s;
}

std::string polyline(const Panel& p, const std::vector<std::pair<double, double>>& pts,
                     const char* colour, double width) {
  std::string s = absl::StrFormat("<polyline fill='none' stroke='%s' stroke-width='%.1f' points='",
                                  colour, width);
  for (const auto& [x, y] : pts) absl::StrAppendFormat(&s, "%.1f,%.1f ", p.px(x), p.py(y));
  return s + "'/>\n";
}

std::string markers(const Panel& p, const std::vector<std::pair<double, double>>& pts,
                    const char* colour) {
  std::string s;
  for (const auto& [x, y] : pts) {
    absl::StrAppendFormat(&s, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", p.px(x),
                          p.py(y), colour);
  }
  return s;
}

}  // namespace

std::string plot_svg(const std::vector<EpochRecord>& epochs,
                     const std::vector<double>& step_losses) {
  const double n_epochs = std::max<double>(1, epochs.size());
  // Loss panel: x in epochs (a step at index i of n lies at (i + 1) / n * epochs).
  std::vector<std::pair<double, double>> steps, epoch_loss, accuracy;
  for (size_t i = 0; i < step_losses.size(); ++i) {
    if (!std::isfinite(step_losses[i])) continue;
    steps.emplace_back((i + 1.0) / step_losses.size() * n_epochs, step_losses[i]);
  }
  for (const EpochRecord& r : epochs) {
    epoch_loss.emplace_back(r.epoch, r.train_loss);
    accuracy.emplace_back(r.epoch, 100 * r.test_accuracy);
  }
  double lmin = INFINITY, lmax = -INFINITY, amin = INFINITY, amax = -INFINITY;
  for (const auto& pts : {steps, epoch_loss}) {
    for (const auto& [x, y] : pts) {
      lmin = std::min(lmin, y);
      lmax = std::max(lmax, y);
    }
  }
  for (const auto& [x, y] : accuracy) {
    amin = std::min(amin, y);
    amax = std::max(amax, y);
  }
  if (!std::isfinite(lmin)) lmin = lmax = 0;
  if (!std::isfinite(amin)) amin = amax = 0;
  lmin = std::min(0.0, lmin);
  amin = std::floor(amin - 1);
  amax = std::min(100.0, std::ceil(amax + 1));
  widen(lmin, lmax);
  widen(amin, amax);
  const Panel loss{60, 40, 380, 260, 0, n_epochs, lmin, lmax};
  const Panel acc{540, 40, 380, 260, epochs.size() > 1 ? 1.0 : 0.0, n_epochs, amin, amax};
  std::string s =
      "<svg xmlns='http://www.w3.org/2000/svg' width='960' height='350' "
      "font-family='sans-serif'>\n<rect width='960' height='350' fill='white'/>\n";
  s += axes(loss, "training loss", "epoch", 3);
  s += polyline(loss, steps, "#9ab", 1);
  s += polyline(loss, epoch_loss, "#c33", 2);
  s += markers(loss, epoch_loss, "#c33");
  s += "<text x='430' y='58' text-anchor='end' font-size='11' fill='#789'>per step</text>\n"
       "<text x='430' y='72' text-anchor='end' font-size='11' fill='#c33'>epoch mean</text>\n";
  s += axes(acc, "test accuracy (%)", "epoch", 1);
  s += polyline(acc, accuracy, "#36c", 2);
  s += markers(acc, accuracy, "#36c");
  return s + "</svg>\n";
}

absl::Status write_plot_svg(const std::string& path, const std::vector<EpochRecord>& epochs,
                            const std::vector<double>& step_losses) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write the plot to ", path));
  f << plot_svg(epochs, step_losses);
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat("writing the plot to ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace streamgrad
