// streamgrad::Error and its subclasses: the one exception hierarchy of the library.
//
// Offers:
//   Error             base class; every library failure a caller can act on derives from it.
//   ValueError        bad argument: malformed device string, shape, dtype, index.
//   IndexError        a ValueError for an index outside the range of the dim it indexes
//                     (index_put_, embedding, nll_loss: what the reference raises as
//                     IndexError); catching ValueError catches it too.
//   DeviceError       a device, stream or event used where it does not belong or is absent.
//   OutOfMemoryError  an allocation the device cannot satisfy (carries the byte counts).
//   DistributedError  other processes: a rendezvous that timed out, a peer that is gone,
//                     processes that disagree (distributed/).
//   IOError           a file that cannot be opened, read or written, or whose bytes are
//                     malformed or truncated (checkpoints); carries errno, 0 for bad bytes.
//   InternalError     a broken invariant inside streamgrad: a bug to report, not user error.
//   SG_CHECK(cond, ErrorType, parts...)   throws ErrorType(StrCat(parts...)) when !cond.
//   SG_INTERNAL_CHECK(cond, parts...)     throws InternalError naming file and line.
//   Error::rethrower()   a function that throws a fresh exception of the same type (and
//                        fields) with another message: how the engine reports a worker's
//                        error on the caller's thread with context added, keeping its type.
//
// Messages name the operation, the values involved and what to do; see ARCHITECTURE.md §8.
// Thread-safety: all types are immutable values, safe to share.
#ifndef STREAMGRAD_RUNTIME_BASE_ERROR_H_
#define STREAMGRAD_RUNTIME_BASE_ERROR_H_

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"

namespace streamgrad {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // Throws a new exception of this object's dynamic type carrying `message`. The function
  // holds copies of the fields, never a reference to this object, so it may be called on
  // another thread after this exception is gone. Subclasses with fields override it.
  using Rethrower = std::function<void(const std::string& message)>;
  virtual Rethrower rethrower() const {
    return [](const std::string& m) { throw Error(m); };
  }
};

// Declares the rethrower() of an Error subclass without fields of its own.
#define SG_ERROR_RETHROWER(Type)                               \
  Rethrower rethrower() const override {                       \
    return [](const std::string& m) { throw Type(m); };        \
  }

class ValueError : public Error {
 public:
  using Error::Error;
  SG_ERROR_RETHROWER(ValueError)
};

class IndexError : public ValueError {
 public:
  using ValueError::ValueError;
  SG_ERROR_RETHROWER(IndexError)
};

class DeviceError : public Error {
 public:
  using Error::Error;
  SG_ERROR_RETHROWER(DeviceError)
};

class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& message, size_t requested, size_t allocated,
                   size_t reserved)
      : Error(message), requested_(requested), allocated_(allocated), reserved_(reserved) {}
  Rethrower rethrower() const override {
    const size_t requested = requested_, allocated = allocated_, reserved = reserved_;
    return [=](const std::string& m) { throw OutOfMemoryError(m, requested, allocated, reserved); };
  }
  size_t requested_bytes() const { return requested_; }
  size_t allocated_bytes() const { return allocated_; }
  size_t reserved_bytes() const { return reserved_; }

 private:
  size_t requested_, allocated_, reserved_;
};

class DistributedError : public Error {
 public:
  using Error::Error;
  SG_ERROR_RETHROWER(DistributedError)
};

class IOError : public Error {
 public:
  explicit IOError(const std::string& message, int error_number = 0)
      : Error(message), error_number_(error_number) {}
  Rethrower rethrower() const override {
    const int error_number = error_number_;
    return [=](const std::string& m) { throw IOError(m, error_number); };
  }
  // The errno of the failed system call (ENOENT for a missing file, ENOSPC for a full
  // disk, ...); 0 when the file was read but its contents are not valid.
  int error_number() const { return error_number_; }

 private:
  int error_number_;
};

class InternalError : public Error {
 public:
  using Error::Error;
  SG_ERROR_RETHROWER(InternalError)
};

}  // namespace streamgrad

#define SG_CHECK(cond, ErrorType, ...)                    \
  do {                                                    \
    if (!(cond)) throw ErrorType(absl::StrCat(__VA_ARGS__)); \
  } while (0)

#define SG_INTERNAL_CHECK(cond, ...)                                                     \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::streamgrad::InternalError(absl::StrCat(                                    \
          "streamgrad internal error at ", __FILE__, ":", __LINE__, ": ", #cond, ": ",   \
          ##__VA_ARGS__, " (this is a bug in streamgrad; please report it)"));           \
  } while (0)

#endif  // STREAMGRAD_RUNTIME_BASE_ERROR_H_
