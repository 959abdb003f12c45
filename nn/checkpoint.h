// Checkpoints in the safetensors format, so files written by Python's `safetensors`
// package load here and files written here load there.
//
// Offers:
//   save_safetensors / load_safetensors   named tensors (+ string metadata) to and from a file
//   save_checkpoint / load_checkpoint     a Module's state dict and, optionally, an
//                                         Optimizer's state, all-or-nothing on load
//   metadata_number / parse_metadata_number   numbers as metadata strings, exactly
//
//   nn::save_checkpoint("run.safetensors", *model, &opt, {{"epoch", "3"}});
//   try {
//     nn::Metadata meta = nn::load_checkpoint("run.safetensors", *model, &opt);
//   } catch (const Error& e) {   // IOError, ValueError, ...: model and opt unchanged
//     std::cerr << e.what() << "\n";
//   }
//
// The format: an 8-byte little-endian header length N, N bytes of JSON header (an object
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an
// optional "__metadata__" object of strings), then the data buffer, tensors dense,
// row-major and little-endian at their offsets, covering it without holes or overlap.
// Supported dtypes: F32, F64, F16, BF16, I64 and BOOL (streamgrad's six); a file holding another
// dtype is refused. Writers here pad the header with spaces so the data starts 8-byte
// aligned and order the data by element size (largest first) then name, as Python does.
//
// A checkpoint stores the model's state_dict() under its own names (readable by Python
// as a plain state dict) and, with an optimiser, its state tensors as
// "optimizer.<param index>.<name>" and its scalars (lr, step counts, parameter groups
// and each group's options: nn/optimizer.h) as "optimizer.<name>" entries of
// "__metadata__" (metadata values are strings: numbers are
// written with 17 significant digits, so they round-trip exactly). Model keys and user
// metadata keys may not start with "optimizer.". Loading without an optimiser ignores
// those entries, as torch.load of a full checkpoint followed by picking the model part.
//
// Saving copies each tensor to the host ordered on its device's current stream, writes a
// temporary file beside `path`, flushes it and renames it over `path`: a crash leaves the
// old file or the new one, never half of one. Loading reads and validates the whole
// file (header, every entry, offsets, values of BOOL tensors) and, for checkpoints, every
// key, shape and dtype against the model and the optimiser before changing anything;
// tensors are created on the devices of the parameters and buffers they replace.
//
// Failure: every function throws, as torch::load does, with a message that
// names the function, the file, the key and the problem:
//   IOError           the file cannot be opened, read or written (error_number() is the
//                     errno: ENOENT, EACCES, ENOSPC...), or its bytes are malformed or
//                     truncated (error_number() 0);
//   ValueError        bad arguments to save; a file that does not match the model or the
//                     optimiser; a dtype streamgrad does not have;
//   OutOfMemoryError  no memory for the file or its tensors;
//   other streamgrad::Error subclasses as the device or the module threw them (DeviceError...).
// After a failed load the model and the optimiser are exactly as they were; after a
// failed save `path` is as it was.
// Thread-safety: the functions are reentrant; a model or optimiser being saved must not
// be changed concurrently, one being loaded must not be used concurrently.
#ifndef STREAMGRAD_NN_CHECKPOINT_H_
#define STREAMGRAD_NN_CHECKPOINT_H_

#include <map>
#include <string>

#include "nn/module.h"
#include "nn/optim.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {

// The "__metadata__" of a safetensors file: free-form strings.
using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // in name order
  Metadata metadata;
};

// Names must be unique, non-empty and not "__metadata__"; tensors defined.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
// Every tensor is created on `device`.
SafetensorsContents load_safetensors(const std::string& path, Device device = Device("cpu"));

// The "__metadata__" alone, after the same validation of the whole file: to see what a
// checkpoint holds (which model, which epoch) before loading it into anything.
Metadata load_safetensors_metadata(const std::string& path);

void save_checkpoint(const std::string& path, const Module& module,
                     const Optimizer* optimizer = nullptr, const Metadata& metadata = {});
// Strict, as PyTorch's load_state_dict(strict=True): every model key must be in the
// file and every non-optimiser key of the file in the model. With an optimiser the file
// must hold optimiser state. Returns the user metadata given to save_checkpoint (the
// "optimizer." entries removed).
Metadata load_checkpoint(const std::string& path, Module& module,
                         Optimizer* optimizer = nullptr);

// A number as checkpoints write it into "__metadata__" (the optimiser's scalars; also
// nn::GradScaler::state_dict): 17 significant digits, so that every double reads back
// exactly ("2000" for 2000). parse_metadata_number reads one back: false, leaving *value
// alone, unless the text is one number (spaces around it allowed; "inf" and "nan" are
// numbers: callers check ranges).
std::string metadata_number(double value);
bool parse_metadata_number(const std::string& text, double* value);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_CHECKPOINT_H_
