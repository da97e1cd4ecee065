// Where a command's output goes, and how it gets there. A regular file is
// written all at once or not at all: the content goes to an unnamed file
// in the destination's folder (O_TMPFILE; a short hidden name where the
// file system has none), which is renamed over the destination when
// complete. Standard output ("-"), a device, a FIFO or a terminal is
// written directly, never replaced by a regular file. A symbolic link
// stays a link: the file it points to is replaced.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chunkinv {
namespace signals {
class TempPath;
}

class OutputFile {
 public:
  // Checks now, before any work, that the destination can be written, and
  // throws UsageError naming the path and why. Creates nothing: a process
  // killed at any later time leaves no temporary behind.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes `content`; throws UsageError on any write error (a full disk, /dev/full).
  // `complete`, where given, is called with the complete file's descriptor
  // before it takes the destination's name (a regular file only), so that
  // it can be locked before anyone can open it (a checkpoint's lock).
  void commit(const std::string& content, const std::function<void(int fd)>& complete = {});
  // The same in two steps, for outputs that go together (a report and the
  // file it names): stage() writes the content under a hidden temporary
  // name (kept in memory for stdout, a device or a FIFO), publish() gives
  // it the destination. Staged and never published, it leaves nothing.
  void stage(const std::string& content, const std::function<void(int fd)>& complete = {});
  void publish();

  const std::string& path() const { return path_; }      // as given
  const std::string& target() const { return target_; }  // the file replaced: symbolic links resolved
  bool to_stdout() const { return mode_ == Mode::kStdout; }  // "-", /dev/stdout, or the file stdout is
  bool replaced_atomically() const { return mode_ == Mode::kAtomic; }
  // Throws UsageError when the destination is one of `inputs` (it would be
  // overwritten by what was made from it).
  // An input that is a directory (a tensor set) counts each of its files.
  // Compared by file identity (device and inode), so that a link, a hard
  // link or another spelling of an input is refused too.
  void refuse_overwriting(const std::vector<std::string>& inputs) const;
  // Whether this and `other` are one file (existing or not, links resolved).
  bool same_destination(const OutputFile& other) const;

 private:
  enum class Mode { kAtomic, kDirect, kStdout };
  std::string path_, target_;
  Mode mode_ = Mode::kAtomic;
  bool staged_ = false;
  std::string staged_content_, staged_tmp_;  // what publish() writes, or renames
  std::unique_ptr<signals::TempPath> guard_;   // a signal removes the temporary
};

// A file name of our own beside `file`: `file` + `suffix`, or, where that
// is longer than the file system allows, a shortened name with a hash of
// the whole one (the same for the same `file`).
std::string sibling_path(const std::string& file, const std::string& suffix);

}  // namespace chunkinv
