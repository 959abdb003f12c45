// tools/train --model=gpt's closing sample: text continued from a prompt by the trained
// model, one character at a time: the logits of the last position (the model sees at most
// its context) divided by the temperature, all but the top_k largest dropped, softmax, and
// one draw from the seeded generator. The logits are read back to the host each step
// (a few hundred steps: the time is the model's forward, not the copy).
//
// Thread-safety: call from the training thread. Failure: ValueError for a temperature
// <= 0, top_k < 0 (0 keeps every character) or a prompt with characters outside the
// vocabulary (empty: the generation starts from a newline, or the first character).
#ifndef STREAMGRAD_TOOLS_TRAIN_GENERATE_H_
#define STREAMGRAD_TOOLS_TRAIN_GENERATE_H_

#include <cstdint>
#include <string>

#include "nn/data/text.h"
#include "tools/train_models_gpt.h"

namespace streamgrad {

struct SampleOptions {
  int64_t chars = 300, top_k = 40;
  double temperature = 0.8;
  uint64_t seed = 0;
};

// The prompt followed by `options.chars` generated characters. The model is put in eval
// mode for the sampling and back in train mode after.
std::string generate(Gpt& model, const nn::CharVocab& vocab, const std::string& prompt,
                     const SampleOptions& options, Device device);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_GENERATE_H_
