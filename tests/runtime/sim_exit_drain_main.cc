// Helper of sim_exit_drain_test.sh: queues work on a sim stream that finishes well after
// main returns (it sleeps, then writes argv[1]), and returns without synchronising. The
// process must still finish that work before exit tears libraries down (OpenBLAS frees
// its buffers in a destructor, and a worker inside a dgemm then crashed):
// SimExecutor::drain_before_exit, run by an atexit handler.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/runtime.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string marker = argv[1];
  const streamgrad::Stream s = streamgrad::current_stream(streamgrad::Device("sim:0"));
  streamgrad::launch(s, streamgrad::LaunchDesc{"late_write", {}, {}}, [marker] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(marker) << "done\n";
  });
  return 0;  // no synchronize: exit must drain the stream
}
