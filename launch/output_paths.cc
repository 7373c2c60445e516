#include "launch/output_paths.h"

#include <sstream>

#include "runtime/data/data_spec.h"

namespace ddp {

std::vector<PathUse> InputPaths(const TrainOptions& options) {
  std::vector<PathUse> inputs;
  auto data = [&](const char* flag, const std::string& spec) {
    // An image folder is read whole: an output inside it would be read as
    // an image next time.
    if (const std::string folder = SpecPath(spec, "imagefolder:"); !folder.empty()) {
      inputs.push_back({flag, folder, true, true});
      return;
    }
    // tokens:PATH may list shards and directories, comma-separated: each is
    // an input (a directory's *.tokens files only, so outputs may sit beside them).
    if (const std::string tokens = SpecPath(spec, "tokens:"); !tokens.empty()) {
      std::stringstream list(tokens);
      for (std::string part; std::getline(list, part, ',');) {
        if (!part.empty()) inputs.push_back({flag, part, false});
      }
      return;
    }
    if (const std::string path = SpecPath(spec); !path.empty()) inputs.push_back({flag, path, false});
  };
  data("--data", options.data);
  data("--eval-data", options.eval_data);
  if (!options.load_weights.empty()) inputs.push_back({"--load-weights", options.load_weights, false});
  if (!options.config.empty()) inputs.push_back({"--config", options.config, false});
  if (!options.squad_eval_file.empty()) inputs.push_back({"--squad-eval-file", options.squad_eval_file, false});
  if (options.resume && !options.checkpoint_dir.empty()) {
    inputs.push_back({"--checkpoint-dir", options.checkpoint_dir, true});
  }
  return inputs;
}

std::vector<PathUse> OutputPaths(const TrainOptions& options) {
  std::vector<PathUse> outputs;
  for (const PathUse& use : std::vector<PathUse>{{"--save-weights", options.save_weights, false},
                                                 {"--metrics-file", options.metrics_file, false},
                                                 {"--predictions-file", options.predictions_file, false},
                                                 {"--timeline", options.timeline, false},
                                                 {"--profile-file", options.profile_file, false},
                                                 {"--contention-probe", options.contention_probe, false},
                                                 {"--tensorboard-dir", options.tensorboard_dir, true},
                                                 {"--checkpoint-dir", options.checkpoint_dir, true}}) {
    if (!use.path.empty()) outputs.push_back(use);
  }
  return outputs;
}

}  // namespace ddp
