// tools/train's reports: the per-epoch JSON line, the SVG curves (points where the
// values put them), and the progress lines a non-terminal gets.
#include <catch2/catch.hpp>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/train_report.h"

namespace streamgrad {
namespace {

EpochRecord record(int epoch, double loss, double accuracy) {
  EpochRecord r;
  r.epoch = epoch;
  r.train_loss = loss;
  r.test_loss = loss + 0.05;
  r.test_accuracy = accuracy;
  r.examples_per_s = 1234.5;
  r.seconds = 9.5;
  r.peak_memory_bytes = 1 << 20;
  r.peak_reserved_bytes = 3 << 20;
  r.peak_pinned_bytes = 5 << 20;
  r.lr = 0.125;
  return r;
}

// The points of every <polyline> in order, as (x, y) pixel pairs.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  const std::regex line("<polyline[^>]*points='([^']*)'");
  const std::regex point("(-?[0-9.]+),(-?[0-9.]+)");
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), end; it != end; ++it) {
    const std::string pts = (*it)[1];
    out.emplace_back();
    for (std::sregex_iterator p(pts.begin(), pts.end(), point); p != end; ++p) {
      out.back().emplace_back(std::stod((*p)[1]), std::stod((*p)[2]));
    }
  }
  return out;
}

TEST_CASE("an epoch is one JSON object with every measured field", "[train]") {
  const nlohmann::json j = nlohmann::json::parse(epoch_json(record(3, 0.25, 0.9)));
  CHECK(j.at("epoch") == 3);
  CHECK(j.at("train_loss").get<double>() == 0.25);
  CHECK(j.at("test_loss").get<double>() == Approx(0.3));
  CHECK(j.at("test_accuracy").get<double>() == 0.9);
  CHECK(j.at("examples_per_s").get<double>() == 1234.5);
  CHECK(j.at("seconds").get<double>() == 9.5);
  CHECK(j.at("peak_memory_bytes") == 1 << 20);
  CHECK(j.at("peak_reserved_bytes") == 3 << 20);
  CHECK(j.at("peak_pinned_bytes") == 5 << 20);
  CHECK(j.at("lr") == 0.125);
  CHECK(epoch_json(record(1, 1, 1)).find('\n') == std::string::npos);
  // A diverged run: JSON has no NaN, so the loss is null and the line still parses.
  const nlohmann::json diverged = nlohmann::json::parse(epoch_json(record(2, NAN, 0.1)));
  CHECK(diverged.at("train_loss").is_null());
}

TEST_CASE("the SVG puts each epoch's loss and accuracy where their values say", "[train]") {
  const std::vector<EpochRecord> epochs{record(1, 0.8, 0.80), record(2, 0.5, 0.86),
                                        record(3, 0.4, 0.88)};
  const std::vector<double> steps{1.2, 0.9, NAN, 0.7, 0.6, 0.5};
  const std::string svg = plot_svg(epochs, steps);
  CHECK(svg.rfind("<svg xmlns='http://www.w3.org/2000/svg'", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);  // a NaN step loss is left out
  const auto lines = polylines(svg);
  REQUIRE(lines.size() == 3);  // step losses, epoch losses, accuracy
  CHECK(lines[0].size() == 5);
  REQUIRE(lines[1].size() == 3);
  REQUIRE(lines[2].size() == 3);
  // Lower loss is drawn lower on the page's y axis (larger pixel y), x grows with epochs.
  CHECK(lines[1][0].second < lines[1][1].second);
  CHECK(lines[1][1].second < lines[1][2].second);
  CHECK(lines[1][0].first < lines[1][2].first);
  // Higher accuracy is drawn higher (smaller pixel y); equal spacing for equal steps.
  CHECK(lines[2][0].second > lines[2][2].second);
  const double d1 = lines[2][0].second - lines[2][1].second;  // 6 points
  const double d2 = lines[2][1].second - lines[2][2].second;  // 2 points
  CHECK(d1 == Approx(3 * d2).epsilon(0.02));
}

TEST_CASE("an empty run still gives a valid picture", "[train]") {
  const std::string svg = plot_svg({}, {});
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("writing the plot where it cannot be written names the path", "[train]") {
  const absl::Status s = write_plot_svg("/nonexistent-dir/x.svg", {record(1, 1, 0.5)}, {});
  CHECK_FALSE(s.ok());
  CHECK(std::string(s.message()).find("/nonexistent-dir/x.svg") != std::string::npos);
}

TEST_CASE("off a terminal, progress is a plain line every N steps and one at the end",
          "[train]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  Progress p(f, /*terminal=*/false, /*steps=*/25, /*epoch=*/2, /*epochs=*/5, /*plain_every=*/10);
  for (int step = 1; step <= 25; ++step) p.update(step, step * 64, 1.0 / step);
  p.finish();
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
  std::fclose(f);
  INFO(text);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);  // steps 10, 20, then 25
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find("epoch 2/5 10/25") != std::string::npos);
  CHECK(text.find("epoch 2/5 25/25  loss 0.0400") != std::string::npos);
  CHECK(text.find("ex/s") != std::string::npos);
  CHECK(text.find("eta 00:00") != std::string::npos);
}

}  // namespace
}  // namespace streamgrad
