#include "core/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/signals.hpp"
#include "core/text.hpp"

namespace chunkinv {
namespace {

std::string dir_of(const std::string& p) {
  const size_t s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

std::string base_of(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

size_t name_max(const std::string& dir) {
  const long n = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  return n > 0 ? static_cast<size_t>(n) : 255;
}

// Follows symbolic links one by one, so that a dangling link also resolves
// to the file it names.
std::string resolve_links(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string t(PATH_MAX, '\0');
    const ssize_t n = ::readlink(p.c_str(), t.data(), t.size());
    if (n < 0) return p;
    t.resize(static_cast<size_t>(n));
    p = t.starts_with('/') ? t : dir_of(p) + "/" + t;
  }
  throw UsageError(fmt::format("output {}: too many levels of symbolic links", path));
}

// A short hidden name beside `target` for the moment between writing and renaming.
std::string temp_name(const std::string& target) {
  const std::string dir = dir_of(target), base = base_of(target);
  const std::string tail = fmt::format(".{}.tmp", static_cast<long>(::getpid()));
  const size_t keep = std::min(base.size(), name_max(dir) > tail.size() + 2 ? name_max(dir) - tail.size() - 1 : 0);
  return dir + "/." + base.substr(0, keep) + tail;
}

void write_all(int fd, const std::string& content, const std::string& path) {
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t w = ::write(fd, content.data() + off, std::min<size_t>(content.size() - off, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw UsageError(fmt::format("output {}: write failed ({})", path, std::strerror(errno)));
    }
    off += static_cast<size_t>(w);
  }
}

void close_checked(int fd, const std::string& path) {
  if (::close(fd) != 0 && errno != EINTR)
    throw UsageError(fmt::format("output {}: write failed ({})", path, std::strerror(errno)));
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)), target_(path_) {
  if (path_.empty()) throw UsageError("output: the file name is empty");
  if (path_ == "-") {
    mode_ = Mode::kStdout;
    return;
  }
  struct stat st, out;
  if (::stat(path_.c_str(), &st) == 0) {
    if (::fstat(STDOUT_FILENO, &out) == 0 && same_file(st, out)) {
      mode_ = Mode::kStdout;
      return;
    }
    if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("output {}: is a directory; give a file name", path_));
    if (!S_ISREG(st.st_mode)) {  // a device, a FIFO, a terminal, a socket: written as it is
      if (::access(path_.c_str(), W_OK) != 0)
        throw UsageError(fmt::format("output {}: cannot be written ({})", path_, std::strerror(errno)));
      mode_ = Mode::kDirect;
      return;
    }
  }
  target_ = resolve_links(path_);
  const std::string dir = dir_of(target_), base = base_of(target_);
  if (base.empty() || base == "." || base == "..")
    throw UsageError(fmt::format("output {}: is a directory; give a file name", path_));
  struct stat ds;
  if (::stat(dir.c_str(), &ds) != 0)
    throw UsageError(fmt::format("output {}: folder {} {}", path_, dir,
                                 errno == ENOENT ? "does not exist" : std::string("cannot be used: ") + std::strerror(errno)));
  if (!S_ISDIR(ds.st_mode)) throw UsageError(fmt::format("output {}: {} is not a folder", path_, dir));
  if (base.size() > name_max(dir))
    throw UsageError(fmt::format("output {}: the file name is {} bytes, longer than the {} this file system allows", path_,
                                 base.size(), name_max(dir)));
  if (::stat(target_.c_str(), &st) == 0 && ::access(target_.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("output {}: the file is read-only ({})", path_, std::strerror(errno)));
  // Can a file be made there? An unnamed one leaves nothing behind.
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    const std::string probe = temp_name(target_);
    signals::TempPath guard(probe);
    fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) ::unlink(probe.c_str());
  }
  if (fd < 0) throw UsageError(fmt::format("output {}: cannot create a file in {} ({})", path_, dir, std::strerror(errno)));
  ::close(fd);
}

OutputFile::~OutputFile() {
  if (!staged_tmp_.empty()) ::unlink(staged_tmp_.c_str());
}

void OutputFile::commit(const std::string& content, const std::function<void(int fd)>& complete) {
  stage(content, complete);
  publish();
}

void OutputFile::stage(const std::string& content, const std::function<void(int fd)>& complete) {
  if (staged_) throw std::logic_error("output: staged twice");
  staged_ = true;
  if (mode_ != Mode::kAtomic) {
    staged_content_ = content;
    return;
  }
  const std::string dir = dir_of(target_), tmp = temp_name(target_);
  guard_ = std::make_unique<signals::TempPath>(tmp);  // a signal from here on removes it
  struct stat old;
  const bool replaces = ::stat(target_.c_str(), &old) == 0;
  auto fail = [&](int fd, const char* what) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw UsageError(fmt::format("output {}: {} ({})", path_, what, why));
  };
  auto fill = [&](int fd) {
    if (replaces) ::fchmod(fd, old.st_mode & 07777);  // the replaced file's mode
    try {
      write_all(fd, content, path_);
    } catch (...) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw;
    }
    if (::fdatasync(fd) != 0 && errno != EINVAL) fail(fd, "write failed");
    if (complete) try {
        complete(fd);
      } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
      }
  };
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  bool named = false;
  if (fd >= 0) {
    fill(fd);
    // Give the complete file a hidden name; publish() moves it into place.
    const std::string self = fmt::format("/proc/self/fd/{}", fd);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      named = true;
      if (::close(fd) != 0 && errno != EINTR) fail(-1, "write failed");
    } else {
      ::close(fd);  // no /proc: write it again under a name
    }
  }
  if (!named) {
    fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) fail(-1, "cannot create a temporary file");
    fill(fd);
    if (::close(fd) != 0 && errno != EINTR) fail(-1, "write failed");
  }
  staged_tmp_ = tmp;
}

void OutputFile::publish() {
  if (!staged_) throw std::logic_error("output: published before it was staged");
  if (mode_ == Mode::kStdout) {
    std::fflush(stdout);  // what was printed before comes first
    write_all(STDOUT_FILENO, staged_content_, path_);
    return;
  }
  if (mode_ == Mode::kDirect) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);  // O_TRUNC: ignored by devices and FIFOs
    if (fd < 0) throw UsageError(fmt::format("output {}: cannot be opened ({})", path_, std::strerror(errno)));
    try {
      write_all(fd, staged_content_, path_);
    } catch (...) {
      ::close(fd);
      throw;
    }
    close_checked(fd, path_);
    return;
  }
  if (::rename(staged_tmp_.c_str(), target_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    throw UsageError(fmt::format("output {}: cannot be renamed into place ({})", path_, why));  // the destructor removes it
  }
  staged_tmp_.clear();
  guard_.reset();
}

void OutputFile::refuse_overwriting(const std::vector<std::string>& inputs) const {
  if (mode_ == Mode::kStdout) return;
  struct stat o, i;
  if (::stat(target_.c_str(), &o) != 0) return;  // does not exist yet: no input is it
  const auto refuse = [&](const std::string& in) {
    return UsageError(fmt::format("output {}: is also an input ({}) and would be overwritten; write elsewhere",
                                  printable(path_), printable(in)));
  };
  for (const std::string& in : inputs) {
    if (in.empty() || ::stat(in.c_str(), &i) != 0) continue;
    if (same_file(o, i)) throw refuse(in);
    if (!S_ISDIR(i.st_mode)) continue;
    // A directory input (a tensor set of .npy files): each of its files is read.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(in, ec)) {
      struct stat m;
      if (::stat(e.path().c_str(), &m) == 0 && same_file(o, m)) throw refuse(e.path().string());
    }
  }
}

bool OutputFile::same_destination(const OutputFile& other) const {
  if (to_stdout() || other.to_stdout()) return to_stdout() && other.to_stdout();
  struct stat a, b;
  if (::stat(target_.c_str(), &a) == 0 && ::stat(other.target_.c_str(), &b) == 0) return same_file(a, b);
  // Not both there yet: the same name in the same folder.
  return base_of(target_) == base_of(other.target_) && ::stat(dir_of(target_).c_str(), &a) == 0 &&
         ::stat(dir_of(other.target_).c_str(), &b) == 0 && same_file(a, b);
}

std::string sibling_path(const std::string& file, const std::string& suffix) {
  const std::string dir = dir_of(file), base = base_of(file);
  if (base.size() + suffix.size() <= name_max(dir)) return file + suffix;
  const std::string hash = fmt::format("-{:016x}", fnv1a(base));
  const size_t keep = name_max(dir) - suffix.size() - hash.size();
  return (file.find('/') == std::string::npos ? "" : dir + "/") + base.substr(0, keep) + hash + suffix;
}

}  // namespace chunkinv
