// `imagefolder:DIR`: an ImageNet-style tree, one folder per class (classes
// are the sorted folder names, as torchvision's ImageFolder has them), each
// holding .jpg, .jpeg or .png files at any depth. Samples are numbered class
// by class, files in sorted order. A batch's images are decoded and
// transformed (image_transforms.h) on a pool of loader threads.
//
// A file that does not decode is skipped with one warning naming it (once
// per process) and replaced by the next sample in file order that decodes,
// with that sample's label and augmentation: a rule that does not depend on
// the rank, so N ranks still equal one rank with accumulation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/image_dataset.h"
#include "runtime/data/image_transforms.h"
#include "runtime/status.h"

namespace ddp {

struct ImageFolderOptions {
  int64_t image_size = 224;
  bool train = true;  // random crops and flips; false: the evaluation transform
  AugmentOptions augment;
  uint64_t seed = 1;
  int loader_threads = 1;
  // Class names another folder must match (a held-out set's); empty: any.
  std::vector<std::string> expected_classes;
};

class ImageFolderDataset;

// Scans `dir`. Errors (no such directory, no class folders, a class folder
// without images, classes unlike expected_classes) name the path; `flag`
// ("--data") prefixes them.
StatusOr<std::unique_ptr<ImageFolderDataset>> OpenImageFolder(const std::string& flag, const std::string& dir,
                                                               const ImageFolderOptions& options);

class ImageFolderDataset : public ImageDataset {
 public:
  ~ImageFolderDataset() override;
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t channels() const override { return 3; }
  int64_t image_size() const override { return options_.image_size; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  const std::vector<std::string>& classes() const { return classes_; }
  int64_t Fill(const int64_t* indices, int64_t count, int64_t epoch, Tensor& images, Tensor& labels) const override;
  bool ReadsFiles() const override { return true; }

  // Decodes 8 samples spread over the set, as a batch would (stand-ins
  // included): a folder whose files do not decode is refused at start-up,
  // not found at its first batch or, held out, after training.
  Status Probe() const override;

  // One sample into chw [3, size, size]: its label, or the error that
  // makes it unusable (the file's path first).
  StatusOr<int64_t> Load(int64_t index, int64_t epoch, float* chw) const;

 private:
  // Sample `wanted`, or the next in file order that decodes (replaced: 1),
  // warning once per file that does not; too many in a row is an error
  // naming the folder.
  StatusOr<int64_t> LoadOrStandIn(int64_t wanted, int64_t epoch, float* chw, int64_t* replaced) const;

  friend StatusOr<std::unique_ptr<ImageFolderDataset>> OpenImageFolder(const std::string&, const std::string&,
                                                                      const ImageFolderOptions&);
  struct Sample {
    std::string path;
    int64_t label;
  };
  ImageFolderDataset(std::string flag, std::string dir, ImageFolderOptions options);

  std::string flag_, dir_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
  struct Shared;  // the loader pool and the files already warned about
  std::unique_ptr<Shared> shared_;
};

}  // namespace ddp
