/* SPDX-License-Identifier: Apache-2.0 */
/* The one-program commands' runtime of a program from run's command line
 * (wrappers and their flags, durations and VAR=value words looked
 * through) and of a live process, and each runtime's default rate. */
#include <unistd.h>

#include "program.h"
#include "testlib.h"

static const char *of(const char *const *argv) {
  size_t n = 0;
  while (argv[n])
    n++;
  return pp_program_runtime_of_argv(argv, n);
}

int main(void) {
  CHECK_EQ_STR(of((const char *const[]){"python3", "app.py", NULL}), "python");
  CHECK_EQ_STR(of((const char *const[]){"/usr/bin/python3.11", "-c", "pass", NULL}), "python");
  CHECK_EQ_STR(of((const char *const[]){"timeout", "-s", "KILL", "5", "node", "x.js", NULL}),
               "nodejs");
  CHECK_EQ_STR(of((const char *const[]){"env", "A=1", "nice", "-n", "5", "ruby", "x.rb", NULL}),
               "ruby");
  CHECK_EQ_STR(of((const char *const[]){"env", "-i", "python3", NULL}), "python");
  CHECK_EQ_STR(of((const char *const[]){"java", "-jar", "app.jar", NULL}), "java");
  CHECK_EQ_STR(of((const char *const[]){"dotnet", "App.dll", NULL}), "dotnet");
  CHECK_EQ_STR(of((const char *const[]){"php8.2", "artisan", NULL}), "php");
  /* a wrapper's program is the first plain word, a shell is native */
  CHECK_EQ_STR(of((const char *const[]){"sh", "-c", "python3 x.py", NULL}), "native");
  CHECK_EQ_STR(of((const char *const[]){"make", "-C", "java", NULL}), "native");
  CHECK_EQ_STR(of((const char *const[]){"timeout", NULL}), "native");
  CHECK_EQ_STR(pp_program_runtime_of_argv(NULL, 0), "native");

  CHECK_EQ_INT(pp_program_default_hz("native"), 10000);
  CHECK_EQ_INT(pp_program_default_hz("php"), 10000);
  CHECK_EQ_INT(pp_program_default_hz("python"), 5000);
  CHECK_EQ_INT(pp_program_default_hz("ruby"), 1000);
  CHECK_EQ_INT(pp_program_default_hz("nodejs"), 500);
  CHECK_EQ_INT(pp_program_default_hz("java"), 1000);
  CHECK_EQ_INT(pp_program_default_hz("dotnet"), 1000);

  /* this test is a native program; a pid that is gone is too */
  CHECK_EQ_STR(pp_program_runtime_of_pid(getpid()), "native");
  CHECK_EQ_STR(pp_program_runtime_of_pid(0x3ffffffe), "native");
  return pp_test_finish("test_program_defaults");
}
