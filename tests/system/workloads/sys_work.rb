# System-test workload, Ruby: burns CPU in sys_rb_hot for BUSY_MS out of
# every PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c).
#
# Usage: ruby sys_work.rb BUSY_MS PERIOD_MS LIFETIME_S
def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def sys_rb_hot(ms)
  stop = now + ms / 1000.0
  x = 1
  while now < stop
    2000.times { x = (x * 1103515245 + 12345) & 0xFFFFFFFF }
  end
  x
end

busy, period, life = ARGV[0, 3].map(&:to_f)
$stdout.write("ready #{Process.pid}\n")
$stdout.flush
deadline = now + life
while now < deadline
  t0 = now
  sys_rb_hot(busy)
  left = period / 1000.0 - (now - t0)
  sleep(left) if left > 0
end
