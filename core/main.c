/* Placeholder until the session loop lands (this same issue). */
#include <stdio.h>
int main(void) {
  puts("polyprof " POLYPROF_VERSION);
  return 0;
}
