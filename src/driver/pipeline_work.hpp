// The work of each stage of the GPU sample pipeline (driver/device_pipeline.cu),
// per sample, for a roofline: the FP64 operations on the FP64 units and on
// the tensor cores, the FP16/BF16 tensor-core operations, the FP32-pipe
// operations and the global-memory bytes of each stage the pipeline's stage
// clock names. Counted from the code, as it runs on a sample whose L and
// inverses are finite: docs/roofline.md gives every formula, the code it
// counts, what is left out, and how a floor time is formed from them.
#pragma once
#include <string>

#include "inputs/family.hpp"

namespace chunkinv {

struct StageWork {
  double fp64 = 0, fp64_mma = 0, fp16_mma = 0, fp32 = 0, bytes = 0;  // per sample
  StageWork& operator+=(const StageWork&);
};

struct PipelineWorkShape {
  int chunk = 16, dim = 128, gate_width = 1;
  bool reference = true;     // the gold's own entry is reported (its metrics computed in the gold stage)
  bool gold_l_fp16 = true;   // the gold stage writes fp16(gold L) (gold_run below needs it)
  bool gold_run = true;      // the kernel's second launch: the method on fp16(gold L)
  // The entries whose metrics are computed: the kernel path's and the gold path's, each with its costlier values.
  struct Entry { bool present = false, l_rel_rmse = true, method_only = true, residual = true, l_finite = true; };
  Entry kernel_entry, gold_entry;
  int folded_values = 0;     // metric values folded into sketches a sample, all entries together
  // The family drawn: the device's generator (Family::device_draw). Only the
  // inputs stage depends on it; weak_decay_correlated has per-token gates.
  DeviceDraw::Kind family = DeviceDraw::Kind::kModelLike;
  int kernel_version = 2;    // the kernel path's version option (gpu::kDefaultKernelVersion)
  int pad = 0;               // its pad option: the chunk padded to max(16 ceil(C / 16), pad)
};

// The work of one stage, by the name the pipeline's stage clock gives it
// ("inputs", "gold", "kernel", "metrics(kernel, gold)", "metrics(kernel)", "metrics(gold)", "fold");
// std::invalid_argument for another name. A metrics stage whose entry is
// absent (the pair: either entry) has none; a shape the pipeline does not
// run (docs/roofline.md, "The shape") throws std::invalid_argument too.
StageWork stage_work(const std::string& stage, const PipelineWorkShape& shape);

}  // namespace chunkinv
