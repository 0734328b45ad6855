// redis-server under LD_PRELOAD=runsel, driven by redis-benchmark: the same
// data as without runsel, and proof that runsel, not the jemalloc redis links, served it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runsel.h"
#include "support/heap.h"
#include "support/program_runner.h"

namespace {

using namespace runsel_test;

const char* const kPackages = "redis-server redis-tools";

// Requests per redis-benchmark test; a checked build walks the containers on
// every bin operation, which makes redis ten times slower.
#ifdef RUNSEL_CHECKED_BUILD
const char* const kRequests = "2000";
#else
const char* const kRequests = "20000";
#endif

// A port the kernel just handed out on 127.0.0.1 (free for a moment).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  return port;
}

bool accepts_connections(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return ok;
}

// Fills the server from inside (one EVAL: 100,000 SETs, lists, hashes, some
// large and one huge value, then deletes a third of the keys).
const char* const kPopulate =
    "for i = 1, tonumber(ARGV[1]) do "
    "  redis.call('SET', 'k:' .. i, string.rep('v', i % 700)) "
    "  if i % 10 == 0 then redis.call('RPUSH', 'l:' .. (i % 100), i) end "
    "  if i % 7 == 0 then redis.call('HSET', 'h:' .. (i % 50), i, string.rep('x', i % 3000)) end "
    "  if i % 1000 == 0 then redis.call('SET', 'big:' .. i, string.rep('b', 100000 + i)) end "
    "end "
    "redis.call('SET', 'huge', string.rep('h', 3000000)) "
    "for i = 1, tonumber(ARGV[1]), 3 do redis.call('DEL', 'k:' .. i) end "
    "return redis.call('DBSIZE')";

// A digest of the whole data set, independent of hash-table order (redis
// seeds its hash function randomly per process).
const char* const kDigest =
    "local keys = redis.call('KEYS', '*') "
    "table.sort(keys) "
    "local parts = {} "
    "for _, k in ipairs(keys) do "
    "  local t = redis.call('TYPE', k)['ok'] "
    "  local v "
    "  if t == 'string' then v = redis.call('GET', k) "
    "  elseif t == 'list' then v = table.concat(redis.call('LRANGE', k, 0, -1), ',') "
    "  elseif t == 'hash' then "
    "    local h = redis.call('HGETALL', k) local pairs = {} "
    "    for i = 1, #h, 2 do pairs[#pairs + 1] = h[i] .. '=' .. h[i + 1] end "
    "    table.sort(pairs) v = table.concat(pairs, ',') "
    "  elseif t == 'set' then local m = redis.call('SMEMBERS', k) table.sort(m) v = "
    "table.concat(m, ',') "
    "  else v = t end "
    "  parts[#parts + 1] = k .. '=' .. t .. ':' .. redis.sha1hex(v) "
    "end "
    "return #keys .. ' keys ' .. redis.sha1hex(table.concat(parts, ';'))";

struct ServerRun {
  std::string data;         // what must match between runs
  std::string maps;         // /proc/<pid>/maps while it ran
  std::string memory_info;  // INFO memory
  pid_t pid = -1;
  int exit_status = -1;
};

std::string info_field(const std::string& info, const std::string& name) {
  size_t at = info.find(name + ":");
  if (at == std::string::npos) return "";
  size_t end = info.find_first_of("\r\n", at);
  return info.substr(at + name.size() + 1, end - at - name.size() - 1);
}

// Starts redis-server (preloaded or not), fills it, runs redis-benchmark,
// reads back a digest and stops the server by its pid.
void run_server(bool preload, const std::string& scratch, ServerRun* result) {
  std::string server = find_in_path("redis-server"), cli = find_in_path("redis-cli"),
              benchmark = find_in_path("redis-benchmark");
  int port = free_port();
  ASSERT_GT(port, 0);
  std::string dir = scratch + (preload ? "/with" : "/without");
  std::filesystem::create_directory(dir);
  EnvChanges env = {
      {"LD_PRELOAD", preload ? std::optional(runsel_test::library_path()) : std::nullopt},
      {"RUNSEL_STATS", preload ? std::optional(scratch + "/stats-%p.json") : std::nullopt}};
  pid_t pid = spawn({server, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--daemonize", "no", "--dir", dir, "--logfile", ""},
                    env, {"", dir + "/server.out", dir + "/server.err"}, 300);
  ASSERT_GT(pid, 0);
  result->pid = pid;
  auto log = [&] { return read_file(dir + "/server.out") + read_file(dir + "/server.err"); };
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) FAIL() << "redis-server exited early: " << log();
    ready = accepts_connections(port);
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ready) << "redis-server did not listen on port " << port << ": " << log();
  result->maps = read_file("/proc/" + std::to_string(pid) + "/maps");

  // The clients run without runsel: only the server is under test.
  EnvChanges plain = {{"LD_PRELOAD", std::nullopt}, {"RUNSEL_STATS", std::nullopt}};
  std::vector<std::string> cli_base = {cli, "-h", "127.0.0.1", "-p", std::to_string(port)};
  auto cli_run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = cli_base;
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, plain, "", dir, 120);
  };
  Outcome filled = cli_run({"EVAL", kPopulate, "0", "100000"});
  EXPECT_TRUE(exited_zero(filled.status)) << filled.err;
  Outcome bench =
      run({benchmark, "-h", "127.0.0.1", "-p", std::to_string(port), "-n", kRequests, "-c", "8",
           "-q", "-t", "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,lrange_100"},
          plain, "", dir, 240);
  EXPECT_TRUE(exited_zero(bench.status)) << bench.out << bench.err;
  size_t reports = 0;
  for (size_t at = 0; (at = bench.out.find("requests per second", at)) != std::string::npos; ++at)
    ++reports;
  EXPECT_GE(reports, 10u) << "redis-benchmark output: " << bench.out;
  Outcome digest = cli_run({"EVAL", kDigest, "0"});
  EXPECT_TRUE(exited_zero(digest.status)) << digest.err;
  Outcome dbsize = cli_run({"DBSIZE"});
  Outcome counter = cli_run({"LLEN", "mylist"});
  result->data = "populate: " + filled.out + "dbsize: " + dbsize.out + "mylist: " + counter.out +
                 "digest: " + digest.out;
  result->memory_info = cli_run({"INFO", "memory"}).out;

  // Stopped by its pid: SIGTERM makes redis shut down and exit(0).
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = -1;
  for (int i = 0; i < 400; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (i == 399) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "redis-server ignored SIGTERM for 20 s";
    }
  }
  result->exit_status = status;
  EXPECT_TRUE(exited_zero(status)) << "status " << status << ": " << log();
}

TEST(Redis, ServesTheSameDataUnderRunsel) {
  for (const char* program : {"redis-server", "redis-cli", "redis-benchmark"})
    ASSERT_FALSE(find_in_path(program).empty()) << program << " is not installed (Debian packages "
                                                << kPackages << "; tools/runsel installs them)";
  ScratchDir scratch_dir;
  ASSERT_FALSE(scratch_dir.path.empty());
  ServerRun without, with;
  run_server(false, scratch_dir.path, &without);
  if (HasFatalFailure()) return;
  run_server(true, scratch_dir.path, &with);
  if (HasFatalFailure()) return;

  EXPECT_NE(without.data.find("keys"), std::string::npos) << without.data;
  EXPECT_EQ(with.data, without.data);

  // Both libraries are mapped into the preloaded server...
  std::string library = runsel_test::library_path();
  EXPECT_NE(with.maps.find(library), std::string::npos) << "runsel not mapped:\n" << with.maps;
  EXPECT_EQ(without.maps.find(library), std::string::npos);
  bool links_jemalloc = without.maps.find("libjemalloc") != std::string::npos;

  // ...but runsel served the server's allocations: its stats line for the
  // server's pid counts them...
  std::string stats_path = scratch_dir.path + "/stats-" + std::to_string(with.pid) + ".json";
  std::vector<StatsLine> lines = parse_stats(read_file(stats_path));
  ASSERT_EQ(lines.size(), 1u) << "no stats line from the server in " << stats_path;
  const std::string& json = lines[0].scalars;
  EXPECT_EQ(json_value(json, "variant").value_or("(missing)"), runsel_test::expected_variant())
      << json;
  EXPECT_EQ(json_number(json, "pid"), static_cast<unsigned long long>(with.pid));
  EXPECT_GT(json_number(json, "nmalloc"), 200000u) << json;
  EXPECT_TRUE(stats_identity_holds(json)) << json;

  // ...and jemalloc, which redis still asks for its statistics, saw almost
  // none of them (without runsel, it holds most of used_memory).
  if (links_jemalloc) {
    EXPECT_NE(info_field(without.memory_info, "mem_allocator").find("jemalloc"), std::string::npos);
    double used_without = atof(info_field(without.memory_info, "used_memory").c_str());
    double jemalloc_without = atof(info_field(without.memory_info, "allocator_allocated").c_str());
    double used_with = atof(info_field(with.memory_info, "used_memory").c_str());
    double jemalloc_with = atof(info_field(with.memory_info, "allocator_allocated").c_str());
    printf(
        "redis: used_memory %.0f, jemalloc allocated %.0f without runsel; used_memory %.0f, "
        "jemalloc allocated %.0f with runsel (nmalloc %llu)\n",
        used_without, jemalloc_without, used_with, jemalloc_with, json_number(json, "nmalloc"));
    EXPECT_GT(used_with, 10e6) << with.memory_info;
    EXPECT_GT(jemalloc_without, used_without / 2) << without.memory_info;
    EXPECT_LT(jemalloc_with, used_with / 20) << with.memory_info;
  }
}

}  // namespace
