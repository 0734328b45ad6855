// Running a piece of a test in a forked child, to watch it die: its stderr
// captured, no core dump, its wait status.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace runsel_test {

struct ChildOutcome {
  int status = -1;  // as waitpid reports it; -1 if the child could not start
  std::string err;  // everything it wrote to stderr
};

// Forks, runs body() in the child with stderr into a pipe (the child exits 0
// if body returns), and waits for it.
template <class Body>
ChildOutcome run_in_child(Body body) {
  ChildOutcome outcome;
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return outcome;
  fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    close(err_pipe[0]);
    dup2(err_pipe[1], 2);
    body();
    _exit(0);
  }
  close(err_pipe[1]);
  char buffer[512];
  for (ssize_t n; (n = read(err_pipe[0], buffer, sizeof buffer)) > 0;)
    outcome.err.append(buffer, static_cast<size_t>(n));
  close(err_pipe[0]);
  if (child < 0 || waitpid(child, &outcome.status, 0) != child) outcome.status = -1;
  return outcome;
}

inline bool died_of_abort(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; }

}  // namespace runsel_test
