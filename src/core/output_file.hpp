// Where a command's output goes, and how it gets there. A regular file is
// written all at once or not at all: the content goes to an unnamed file
// in the destination's folder (O_TMPFILE; a short hidden name where the
// file system has none), which is renamed over the destination when
// complete. Standard output ("-"), a device, a FIFO or a terminal is
// written directly, never replaced by a regular file. A symbolic link
// stays a link: the file it points to is replaced.
#pragma once
#include <string>
#include <vector>

namespace chunkinv {

class OutputFile {
 public:
  // Checks now, before any work, that the destination can be written, and
  // throws UsageError naming the path and why. Creates nothing: a process
  // killed at any later time leaves no temporary behind.
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes `content`; throws UsageError on any write error (a full disk, /dev/full).
  void commit(const std::string& content);

  const std::string& path() const { return path_; }      // as given
  const std::string& target() const { return target_; }  // the file replaced: symbolic links resolved
  bool to_stdout() const { return mode_ == Mode::kStdout; }  // "-", /dev/stdout, or the file stdout is
  bool replaced_atomically() const { return mode_ == Mode::kAtomic; }
  // Throws UsageError when the destination is one of `inputs` (it would be
  // overwritten by what was made from it).
  void refuse_overwriting(const std::vector<std::string>& inputs) const;

 private:
  enum class Mode { kAtomic, kDirect, kStdout };
  std::string path_, target_;
  Mode mode_ = Mode::kAtomic;
};

// A file name of our own beside `file`: `file` + `suffix`, or, where that
// is longer than the file system allows, a shortened name with a hash of
// the whole one (the same for the same `file`).
std::string sibling_path(const std::string& file, const std::string& suffix);

}  // namespace chunkinv
