// ThreadSanitizer suppressions for gloo, compiled only into ThreadSanitizer builds
// (--config=tsan): a race inside gloo itself, which would otherwise fail any sanitised
// program that uses the gloo process group.
//
// gloo's tcp transport (Debian libgloo): when a collective fails because a peer left
// (tests/distributed/ddp_test, "a peer that leaves before backward ..."), gloo's transport
// thread signals the exception to the collective's UnboundBuffer
// (UnboundBuffer::signalException, under the pair's lock) while the calling thread, whose
// gloo::allreduce already threw, destroys that buffer (~UnboundBuffer destroys its
// condition variable under the context's lock). Both sides are gloo's code and objects;
// streamgrad only sees the exception, which it reports as a DistributedError.
//
// A program that defines __tsan_default_suppressions itself cannot link this library in a
// ThreadSanitizer build; add the line below to its own list instead.
#if defined(__SANITIZE_THREAD__)
//
// TSan names a race by both stacks; the destroying side is sometimes ~UnboundBuffer and
// sometimes only the operator delete after it (seen in tests/distributed/process_group_test),
// so the signalling side is named too.
extern "C" const char* __tsan_default_suppressions() {
  return "race:gloo::transport::tcp::UnboundBuffer::~UnboundBuffer\n"
         "race:gloo::transport::tcp::UnboundBuffer::signalException\n";
}
#endif
