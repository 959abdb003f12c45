// FileStore (distributed/store.h): records appended to one file under flock.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "distributed/store.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {
namespace {
constexpr char kArrived[] = "__filestore/arrived", kLeft[] = "__filestore/left";
}  // namespace

// The file, open and exclusively locked for one request; its records read into `data`
// (later records win). A record is: key length, key, value length, value (lengths as
// 8-byte host-order integers: the processes share a host, or hosts of one architecture).
class FileStore::Locked {
 public:
  explicit Locked(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    SG_CHECK(fd_ >= 0, DistributedError, "FileStore: cannot open ", path, ": ",
             std::strerror(errno), "; pass a path every process can write");
    while (::flock(fd_, LOCK_EX) != 0) {
      SG_CHECK(errno == EINTR, DistributedError, "FileStore: flock ", path, ": ",
               std::strerror(errno));
    }
    std::string bytes;
    char buf[65536];
    for (ssize_t r; (r = ::pread(fd_, buf, sizeof(buf), static_cast<off_t>(bytes.size()))) != 0;) {
      if (r < 0 && errno == EINTR) continue;
      SG_CHECK(r > 0, DistributedError, "FileStore: read ", path, ": ", std::strerror(errno));
      bytes.append(buf, static_cast<size_t>(r));
    }
    size_t at = 0;
    auto field = [&](std::string* out) {
      uint64_t n = 0;
      if (bytes.size() - at < sizeof(n)) return false;
      std::memcpy(&n, bytes.data() + at, sizeof(n));
      if (bytes.size() - at - sizeof(n) < n) return false;
      out->assign(bytes, at + sizeof(n), n);
      at += sizeof(n) + n;
      return true;
    };
    for (std::string k, v; at < bytes.size() && field(&k) && field(&v);) data[k] = v;
    end_ = static_cast<off_t>(bytes.size());
  }
  ~Locked() { ::close(fd_); }  // closing drops the lock

  void put(const std::string& key, const std::string& value) {
    std::string rec;
    for (const std::string* s : {&key, &value}) {
      const uint64_t n = s->size();
      rec.append(reinterpret_cast<const char*>(&n), sizeof(n));
      rec.append(*s);
    }
    for (size_t done = 0; done < rec.size();) {
      const ssize_t w =
          ::pwrite(fd_, rec.data() + done, rec.size() - done, end_ + static_cast<off_t>(done));
      if (w < 0 && errno == EINTR) continue;
      SG_CHECK(w > 0, DistributedError, "FileStore: write ", path_, ": ", std::strerror(errno));
      done += static_cast<size_t>(w);
    }
    end_ += static_cast<off_t>(rec.size());
    data[key] = value;
  }

  std::map<std::string, std::string> data;

 private:
  const std::string path_;
  int fd_ = -1;
  off_t end_ = 0;
};

FileStore::FileStore(std::string path, int world_size, std::chrono::milliseconds timeout)
    : Store(timeout), path_(std::move(path)), world_size_(world_size) {
  SG_CHECK(world_size >= 1, DistributedError, "FileStore: world_size ", world_size,
           " must be at least 1");
  const int64_t arrived = add(kArrived, 1);
  SG_CHECK(arrived <= world_size, DistributedError, "FileStore: ", arrived,
           " processes arrived at ", path_, " for a world of ", world_size,
           "; a file left by an earlier job? remove it before starting");
  wait_for_count(kArrived, world_size);
}

FileStore::~FileStore() {
  try {
    if (add(kLeft, 1) == world_size_) ::unlink(path_.c_str());
  } catch (const Error&) {
    // A file that cannot be written at exit stays behind; nothing else to do here.
  }
}

void FileStore::set(const std::string& key, const std::string& value) {
  Locked(path_).put(key, value);
}

std::string FileStore::get(const std::string& key) {
  wait({key});
  return Locked(path_).data.at(key);
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  Locked f(path_);
  int64_t now = 0;
  const auto it = f.data.find(key);
  if (it != f.data.end()) (void)absl::SimpleAtoi(it->second, &now);
  if (delta != 0) f.put(key, std::to_string(now + delta));
  return now + delta;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  Locked f(path_);
  for (const std::string& k : keys) {
    if (f.data.count(k) == 0) return false;
  }
  return true;
}

std::string FileStore::where() const { return absl::StrCat("the file store ", path_); }

}  // namespace distributed
}  // namespace streamgrad
