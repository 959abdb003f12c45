// tools/memviz: draws a memory history dump (runtime/memory/memory_history.h's JSON, as
// tools/train --memory-snapshot writes it) as one self-contained HTML page: per device
// (and "pinned", the page-locked host memory that holds offloaded activations), the bytes
// held over time stacked by category (parameter, optimizer, input, activation, gradient,
// offloaded, other, then any other category the program named), the memory the allocator
// holds in its cache above them, the peak, what each category held at the peak and at
// most, and the largest blocks live at the peak with the op that made them.
//
//   memviz --snapshot=memory.json --out=memory.html [--top=20]
//
// A block counts under its category from its allocation until its owner frees it (the
// allocator's allocated bytes, whose peak tools/train reports); a block freed while other
// streams still use it is drawn on top, as "freed, in use elsewhere", until those uses are
// done (the allocator's active bytes). "cached" is what the allocator has reserved from the
// device beyond its active blocks (reserved minus active bytes): segments reserved and
// blocks allocated before recording started are taken from the dump's segments, so that
// the reserved total is right from the start, though those blocks themselves are not drawn.
//
// Exit code 0, or 2 for bad flags, an unreadable or malformed snapshot, or an unwritable
// page.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/cli_flags.h"

ABSL_FLAG(std::string, snapshot, "", "the memory history dump to draw (JSON)");
ABSL_FLAG(std::string, out, "memory.html", "the page to write");
ABSL_FLAG(int64_t, top, 20, "how many of the largest blocks live at the peak to list");

namespace streamgrad {
namespace {

constexpr int kColumns = 800;  // points of each chart: the page stays small for any history
constexpr double kWidth = 900, kHeight = 300, kLeft = 70, kBottom = 30;

constexpr const char* kPending = "freed, in use elsewhere";  // second to last category
constexpr const char* kCached = "cached";                   // always the last category
constexpr const char* kCachedColour = "#c8c8c8";

struct Block {
  int64_t size;
  std::string category, op;
  int64_t stream, time_us;
  bool pending = false;  // freed by its owner, still used on another stream
};

struct Point {
  int64_t time_us;
  std::vector<int64_t> bytes;  // per category index; the last two are kPending and kCached
  int64_t segments = 0;        // segment bytes reserved minus returned since recording began
  int64_t allocated() const {
    int64_t t = 0;
    for (size_t i = 0; i + 2 < bytes.size(); ++i) t += bytes[i];
    return t;
  }
  int64_t active() const { return allocated() + bytes[bytes.size() - 2]; }
  int64_t reserved() const { return active() + bytes.back(); }
};

struct DeviceChart {
  std::vector<Point> points;  // after each event of the device
  size_t peak = 0;            // index into points
  std::vector<Block> live_at_peak;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string mib(int64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

// The fixed categories first, in the order they are stacked; others after, by name.
std::vector<std::string> category_order(const nlohmann::json& events) {
  std::vector<std::string> order = {"parameter", "optimizer", "input",    "activation",
                                    "gradient",  "offloaded", "other"};
  std::vector<std::string> more;
  for (const auto& e : events) {
    const std::string c = e.value("category", "other");
    if (std::find(order.begin(), order.end(), c) == order.end() &&
        std::find(more.begin(), more.end(), c) == more.end()) {
      more.push_back(c);
    }
  }
  std::sort(more.begin(), more.end());
  order.insert(order.end(), more.begin(), more.end());
  order.push_back(kPending);
  order.push_back(kCached);
  return order;
}

// What the dump's segments of `device` say the allocator held when it was written.
struct Held {
  int64_t reserved = 0, active = 0;
};
Held held_at_dump(const nlohmann::json& snap, const std::string& device) {
  Held h;
  if (!snap.contains("segments")) return h;
  for (const auto& seg : snap.at("segments")) {
    if (seg.value("device", "") != device) continue;
    h.reserved += seg.value("size", int64_t{0});
    if (!seg.contains("blocks")) continue;
    for (const auto& blk : seg.at("blocks")) {
      if (blk.value("state", "free") != "free") h.active += blk.value("size", int64_t{0});
    }
  }
  return h;
}

// Sets each point's cached bytes: reserved minus active, where what was reserved and active
// before recording began is what the dump holds beyond what the record accounts for at
// its end (never below 0: a device without segments in the dump, as "pinned", starts empty).
void fill_cached(DeviceChart& chart, const Held& at_dump, int64_t recorded_live) {
  if (chart.points.empty()) return;
  const Point& last = chart.points.back();
  const int64_t reserved_before = std::max<int64_t>(0, at_dump.reserved - last.segments);
  const int64_t active_before = std::max<int64_t>(0, at_dump.active - recorded_live);
  for (Point& p : chart.points) {
    p.bytes.back() = std::max<int64_t>(0, reserved_before + p.segments - active_before -
                                              p.active());
  }
}

std::map<std::string, DeviceChart> replay(const nlohmann::json& snap,
                                          const std::vector<std::string>& categories) {
  const nlohmann::json& events = snap.at("events");
  const auto index_of = [&](const std::string& c) {
    return static_cast<size_t>(std::find(categories.begin(), categories.end(), c) -
                               categories.begin());
  };
  std::map<std::string, DeviceChart> charts;
  std::map<std::string, std::map<uint64_t, Block>> live;
  std::map<std::string, std::vector<int64_t>> bytes;
  std::map<std::string, int64_t> segments;
  // Twice: the first pass finds each device's peak, the second stops there for its blocks.
  for (int pass = 0; pass < 2; ++pass) {
    live.clear();
    bytes.clear();
    segments.clear();
    std::map<std::string, size_t> seen;
    for (const auto& e : events) {
      const std::string device = e.at("device").get<std::string>();
      const std::string action = e.at("action").get<std::string>();
      const bool segment = action == "segment_alloc" || action == "segment_free";
      if (action != "alloc" && action != "free_requested" && action != "free_completed" &&
          !segment) {
        continue;
      }
      std::vector<int64_t>& b = bytes[device];
      b.resize(categories.size(), 0);
      const uint64_t address = e.at("address").get<uint64_t>();
      if (segment) {
        segments[device] += (action == "segment_alloc" ? 1 : -1) * e.at("size").get<int64_t>();
      } else if (action == "alloc") {
        Block blk{e.at("size").get<int64_t>(), e.value("category", "other"), e.value("op", ""),
                  e.value("stream", int64_t{0}), e.value("time_us", int64_t{0})};
        b[index_of(blk.category)] += blk.size;
        live[device][address] = blk;
      } else {
        auto it = live[device].find(address);
        if (it == live[device].end()) continue;  // allocated before recording started
        Block& blk = it->second;
        if (!blk.pending) b[index_of(blk.category)] -= blk.size;
        if (action == "free_requested") {
          if (blk.pending) continue;
          blk.pending = true;
          b.back() += blk.size;
        } else {
          if (blk.pending) b.back() -= blk.size;
          live[device].erase(it);
        }
      }
      DeviceChart& chart = charts[device];
      const size_t k = seen[device]++;
      if (pass == 0) {
        chart.points.push_back(Point{e.value("time_us", int64_t{0}), b, segments[device]});
        if (chart.points.back().allocated() > chart.points[chart.peak].allocated()) {
          chart.peak = k;
        }
      } else if (k == chart.peak) {
        for (const auto& [addr, blk] : live[device]) {
          if (!blk.pending) chart.live_at_peak.push_back(blk);
        }
      }
    }
    if (pass == 0) {
      for (auto& [device, chart] : charts) {
        int64_t recorded_live = 0;
        for (const auto& [addr, blk] : live[device]) recorded_live += blk.size;
        fill_cached(chart, held_at_dump(snap, device), recorded_live);
      }
    }
  }
  return charts;
}

// The chart's columns: the event with the largest total in each, so the peak survives.
std::vector<const Point*> columns(const std::vector<Point>& points) {
  std::vector<const Point*> out;
  const size_t n = points.size();
  const size_t per = std::max<size_t>(1, (n + kColumns - 1) / kColumns);
  for (size_t i = 0; i < n; i += per) {
    const Point* best = &points[i];
    for (size_t j = i; j < std::min(n, i + per); ++j) {
      if (points[j].reserved() > best->reserved()) best = &points[j];
    }
    out.push_back(best);
  }
  return out;
}

std::string colour_of(const std::vector<std::string>& categories,
                      const std::vector<std::string>& colours, size_t c) {
  return categories[c] == kCached ? kCachedColour : colours[c % colours.size()];
}

std::string svg(const DeviceChart& chart, const std::vector<std::string>& categories,
                const std::vector<std::string>& colours) {
  const std::vector<const Point*> cols = columns(chart.points);
  int64_t most = 1;
  for (const Point& p : chart.points) most = std::max(most, p.reserved());
  const double top = static_cast<double>(most);
  const double plot_w = kWidth - kLeft - 10, plot_h = kHeight - kBottom - 10;
  const auto x = [&](size_t i) {
    return kLeft + (cols.size() < 2 ? 0 : plot_w * static_cast<double>(i) / (cols.size() - 1));
  };
  const auto y = [&](double v) { return 10 + plot_h * (1 - v / top); };
  std::ostringstream s;
  s << absl::StrFormat("<svg class=\"chart\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
                       "xmlns=\"http://www.w3.org/2000/svg\">\n",
                       kWidth, kHeight, kWidth, kHeight);
  std::vector<double> below(cols.size(), 0);
  for (size_t c = 0; c < categories.size(); ++c) {
    std::vector<double> above(cols.size());
    bool any = false;
    for (size_t i = 0; i < cols.size(); ++i) {
      above[i] = below[i] + static_cast<double>(cols[i]->bytes[c]);
      any = any || cols[i]->bytes[c] != 0;
    }
    if (any) {
      s << "<path class=\"area\" data-category=\"" << escape(categories[c]) << "\" fill=\""
        << colour_of(categories, colours, c) << "\" d=\"M";
      for (size_t i = 0; i < cols.size(); ++i) {
        s << absl::StrFormat("%s%.1f,%.1f", i ? " L" : "", x(i), y(above[i]));
      }
      for (size_t i = cols.size(); i-- > 0;) s << absl::StrFormat(" L%.1f,%.1f", x(i), y(below[i]));
      s << " Z\"><title>" << escape(categories[c]) << "</title></path>\n";
    }
    below = above;
  }
  // Axes: bytes at the top and half way, time at both ends.
  s << absl::StrFormat("<line x1=\"%g\" y1=\"10\" x2=\"%g\" y2=\"%g\" stroke=\"#333\"/>\n", kLeft,
                       kLeft, kHeight - kBottom);
  s << absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#333\"/>\n", kLeft,
                       kHeight - kBottom, kWidth - 10, kHeight - kBottom);
  for (double f : {1.0, 0.5}) {
    s << absl::StrFormat("<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", kLeft - 4,
                         y(top * f) + 4, escape(mib(static_cast<int64_t>(top * f))));
  }
  const double t0 = chart.points.front().time_us / 1000.0;
  const double t1 = chart.points.back().time_us / 1000.0;
  s << absl::StrFormat("<text x=\"%g\" y=\"%g\">%.1f ms</text>\n", kLeft, kHeight - 8, t0);
  s << absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.1f ms</text>\n", kWidth - 10,
                       kHeight - 8, t1);
  s << "</svg>\n";
  return s.str();
}

std::string page(const std::string& name, const nlohmann::json& snap, int64_t top_n) {
  const nlohmann::json& events = snap.at("events");
  const std::vector<std::string> categories = category_order(events);
  // By category index: offloaded purple, other grey, freed-in-use yellow (cached has its
  // own pale grey, colour_of).
  const std::vector<std::string> colours = {"#4e79a7", "#f28e2b", "#76b7b2", "#e15759",
                                            "#59a14f", "#b07aa1", "#bab0ac", "#edc948",
                                            "#ff9da7", "#9c755f"};
  std::map<std::string, DeviceChart> charts = replay(snap, categories);
  std::ostringstream h;
  h << "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>memviz: " << escape(name)
    << "</title>\n<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse;"
       "margin:1em 0}td,th{padding:2px 8px;text-align:right}td.l,th.l{text-align:left}"
       ".sw{display:inline-block;width:12px;height:12px;margin-right:4px}"
       "svg text{font:11px sans-serif}</style></head>\n<body>\n";
  h << "<h1>Memory over time</h1>\n<p class=\"source\">" << escape(name) << ": "
    << events.size() << " events";
  const int64_t dropped = snap.value("dropped", int64_t{0});
  if (dropped > 0) h << " (the " << dropped << " oldest dropped: the record starts later)";
  h << ".</p>\n";
  if (charts.empty()) h << "<p class=\"empty\">No allocation was recorded.</p>\n";
  for (auto& [device, chart] : charts) {
    const Point& peak = chart.points[chart.peak];
    h << "<section class=\"device\" data-device=\"" << escape(device) << "\">\n<h2>"
      << escape(device) << "</h2>\n<p class=\"peak\" data-bytes=\"" << peak.allocated()
      << "\">peak allocated " << escape(mib(peak.allocated()))
      << " at " << absl::StrFormat("%.1f", peak.time_us / 1000.0) << " ms</p>\n";
    int64_t active = 0;
    for (const Point& p : chart.points) active = std::max(active, p.active());
    int64_t reserved = 0;
    for (const Point& p : chart.points) reserved = std::max(reserved, p.reserved());
    h << "<p class=\"active\" data-bytes=\"" << active << "\">with blocks freed but still in "
      << "use on other streams: at most " << escape(mib(active)) << "</p>\n"
      << "<p class=\"reserved\" data-bytes=\"" << reserved << "\">with what the allocator "
      << "keeps cached: at most " << escape(mib(reserved)) << "</p>\n"
      << svg(chart, categories, colours);
    // Every colour the chart shows gets a row, also a category that held nothing at the
    // peak (gradients, say, peak after the activations are gone).
    std::vector<int64_t> most(categories.size(), 0);
    for (const Point& p : chart.points) {
      for (size_t c = 0; c < categories.size(); ++c) most[c] = std::max(most[c], p.bytes[c]);
    }
    h << "<table class=\"legend\"><tr><th class=\"l\">category</th><th>at the peak</th>"
         "<th>at most</th></tr>\n";
    for (size_t c = 0; c < categories.size(); ++c) {
      if (most[c] == 0) continue;
      h << "<tr data-category=\"" << escape(categories[c]) << "\"><td class=\"l\"><span "
        << "class=\"sw\" style=\"background:" << colour_of(categories, colours, c) << "\"></span>"
        << escape(categories[c]) << "</td><td>" << escape(mib(peak.bytes[c])) << "</td><td>"
        << escape(mib(most[c])) << "</td></tr>\n";
    }
    h << "</table>\n";
    std::vector<Block>& blocks = chart.live_at_peak;
    std::stable_sort(blocks.begin(), blocks.end(),
                     [](const Block& a, const Block& b) { return a.size > b.size; });
    if (static_cast<int64_t>(blocks.size()) > top_n) blocks.resize(static_cast<size_t>(top_n));
    h << "<table class=\"top\"><tr><th>bytes</th><th class=\"l\">category</th><th class=\"l\">"
         "op</th><th>stream</th><th>allocated at</th></tr>\n";
    for (const Block& b : blocks) {
      h << "<tr><td>" << b.size << "</td><td class=\"l\">" << escape(b.category)
        << "</td><td class=\"l\">" << escape(b.op.empty() ? "(no launch wrote it yet)" : b.op)
        << "</td><td>" << b.stream << "</td><td>"
        << absl::StrFormat("%.1f ms", b.time_us / 1000.0) << "</td></tr>\n";
    }
    h << "</table>\n</section>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

int run() {
  const std::string path = absl::GetFlag(FLAGS_snapshot);
  if (path.empty()) throw UsageError{"--snapshot=FILE is required (a memory history dump)"};
  std::ifstream in(user_path(path));
  if (!in) throw UsageError{absl::StrCat("cannot read --snapshot=", path)};
  nlohmann::json snap;
  try {
    snap = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
    if (!snap.contains("events") || !snap.at("events").is_array()) {
      throw UsageError{absl::StrCat("--snapshot=", path,
                                    " has no \"events\" list: not a memory history dump")};
    }
    const std::string html = page(path, snap, absl::GetFlag(FLAGS_top));
    const std::string out = absl::GetFlag(FLAGS_out);
    std::ofstream f(user_path(out));
    f << html;
    if (!f) throw UsageError{absl::StrCat("cannot write --out=", out)};
  } catch (const nlohmann::json::exception& e) {
    throw UsageError{absl::StrCat("--snapshot=", path, " is not a memory history dump: ",
                                  e.what())};
  }
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "memviz",
      "Draws a memory history dump (tools/train --memory-snapshot) as an HTML page: memory "
      "over time by category, the peak, the largest blocks then.\n"
      "Usage: memviz --snapshot=memory.json [--out=memory.html] [--top=20]",
      __FILE__,
      {{"top", 0, 1e9}},
      {}};
  return streamgrad::run_tool(spec, argc, argv, streamgrad::run);
}
