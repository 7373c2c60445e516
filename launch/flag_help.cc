#include "launch/flag_help.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <gflags/gflags.h>

namespace ddp {
namespace {

bool EndsWith(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// ddp_train's own flags by name.
std::map<std::string, gflags::CommandLineFlagInfo> OwnFlags(const std::vector<std::string>& files) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::map<std::string, gflags::CommandLineFlagInfo> own;
  for (const gflags::CommandLineFlagInfo& f : all) {
    for (const std::string& file : files) {
      if (EndsWith(f.filename, file)) own[f.name] = f;
    }
  }
  return own;
}

// A default as people write it: 0.05, not gflags' 0.050000000000000003.
std::string Default(const gflags::CommandLineFlagInfo& f) {
  if (f.type != "double") return f.default_value;
  char text[32];
  std::snprintf(text, sizeof(text), "%g", std::strtod(f.default_value.c_str(), nullptr));
  return text;
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

const std::vector<FlagGroup>& FlagGroups() {
  static const std::vector<FlagGroup> groups = {
      {"What runs",
       {"model", "device", "device_memory_limit", "precision", "loss_scale", "loss_scale_growth_interval",
        "max_skipped_share", "memory_format", "deterministic", "cuda_graphs", "comm", "task", "num_classes",
        "seq_len", "dropout", "activation_checkpointing", "zero_init_residual"}},
      {"How long, how much", {"batch_size", "accumulation_steps", "steps", "epochs", "seed", "threads"}},
      {"Optimizer",
       {"optimizer", "lr", "momentum", "nesterov", "weight_decay", "decay_bn_bias", "warmup_steps", "lr_schedule",
        "lr_step_size", "lr_step_gamma", "lr_poly_power", "label_smoothing", "clip_grad_norm"}},
      {"Data",
       {"data", "eval_data", "eval_every", "shuffle", "image_size", "crop_scale", "hflip", "loader_threads",
        "prefetch", "predictions_file", "squad_eval_file"}},
      {"Distributed",
       {"bucket_mb", "first_bucket_mb", "overlap", "zero_stage", "zero_prefetch", "zero_gather_dtype", "grad_compression",
        "comm_timeout_s"}},
      {"Files",
       {"config", "check_flags", "load_weights", "save_weights", "checkpoint_dir", "checkpoint_every",
        "checkpoint_keep", "resume", "preemption_grace_s"}},
      {"Observability",
       {"metrics_file", "log_every", "tensorboard_dir", "timeline", "timeline_steps", "profile_file",
        "contention_probe", "contention_probe_mb"}},
      {"Memory plan", {"plan_memory", "plan_device", "plan_world_size", "plan_overhead"}},
  };
  return groups;
}

std::string GroupedHelp(const std::string& usage, const std::vector<std::string>& files) {
  const std::map<std::string, gflags::CommandLineFlagInfo> own = OwnFlags(files);
  std::string out = usage + "\n";
  for (const FlagGroup& group : FlagGroups()) {
    out += std::string("\n") + group.title + ":\n";
    for (const char* name : group.flags) {
      auto it = own.find(name);
      if (it == own.end()) continue;
      const gflags::CommandLineFlagInfo& f = it->second;
      const std::string flag = "--" + Dashed(f.name) + (f.type == "bool" ? "" : "=" + Default(f));
      out += "  " + flag + (f.type == "bool" ? " (default " + f.default_value + ")" : "") + "\n      " +
             f.description + "\n";
    }
  }
  const std::vector<std::string> rest = UngroupedFlags(files);
  if (!rest.empty()) {
    out += "\nOther:\n";
    for (const std::string& name : rest) out += "  --" + Dashed(name) + "\n      " + own.at(name).description + "\n";
  }
  out += "\nBooleans take --name or --noname. --helpfull also lists the logging library's flags.\n";
  return out;
}

std::vector<std::string> UngroupedFlags(const std::vector<std::string>& files) {
  std::vector<std::string> rest;
  for (const auto& [name, info] : OwnFlags(files)) {
    bool grouped = false;
    for (const FlagGroup& group : FlagGroups()) {
      grouped = grouped || std::find(group.flags.begin(), group.flags.end(), name) != group.flags.end();
    }
    if (!grouped) rest.push_back(name);
  }
  return rest;
}

std::vector<std::string> UnknownGroupedFlags() {
  std::vector<std::string> unknown;
  for (const FlagGroup& group : FlagGroups()) {
    for (const char* name : group.flags) {
      gflags::CommandLineFlagInfo info;
      if (!gflags::GetCommandLineFlagInfo(name, &info)) unknown.push_back(name);
    }
  }
  return unknown;
}

}  // namespace ddp
