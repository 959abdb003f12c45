// What tools/stream_race prints: the table of scenarios (with the first wrong value,
// error and finding of each), the same as one JSON line for --json, and the catalogue
// for --list.
//
// Thread-safety: call from one thread (they write to stdout). Failure: none; they only
// print.
#ifndef STREAMGRAD_TOOLS_STREAM_RACE_REPORT_H_
#define STREAMGRAD_TOOLS_STREAM_RACE_REPORT_H_

#include <vector>

#include "tools/stream_race_run.h"

namespace streamgrad {

void print_text(const Settings& s, const std::vector<Report>& reports);
void print_json(const Settings& s, const std::vector<Report>& reports);
// The scenarios and whether each is expected safe under the settings' switches.
void print_list(const Settings& s);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_STREAM_RACE_REPORT_H_
