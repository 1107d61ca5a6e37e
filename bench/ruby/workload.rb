# Fixed amount of CPU work with a ~40-frame stack (a 20-level method chain
# over a recursive fib), so the CPU a sampler adds shows as extra CPU time
# of the same work. Usage: ruby workload.rb ITERATIONS [stackprof [US [MODE]]]
# With "stackprof", the work runs under StackProf in cpu mode, one sample
# per US microseconds of CPU (default 10000: 100 Hz), and the sample count
# is printed.
iters = Integer(ARGV[0] || 100)

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

def level(d, n)
  d.zero? ? fib(n) : level(d - 1, n)
end

def work(iters)
  iters.times { level(20, 18) }
end

# With PP_BENCH_GATE set, the work starts when a line arrives on stdin, so a
# profiler can attach first and only the work itself is measured. With
# PP_BENCH_WARMUP=N too, N iterations run after that first line, then
# "warm" is printed and the measured work waits for a second line: a
# profiler attached for a while (caches warm) is measured, as a continuous
# profiler is in its steady state.
if ENV["PP_BENCH_GATE"]
  $stdin.gets
  warm = Integer(ENV["PP_BENCH_WARMUP"] || 0)
  if warm > 0
    work(warm)
    $stdout.puts "warm"
    $stdout.flush
    $stdin.gets
  end
end

if ARGV[1] == "stackprof"
  require "stackprof"
  interval = Integer(ARGV[2] || 10_000)
  # cpu mode's timer (ITIMER_PROF) ticks at the kernel's HZ at best; the
  # high-rate cost measurement uses wall mode (ITIMER_REAL, hrtimer based),
  # whose samples go through the same handler
  mode = (ARGV[3] || "cpu").to_sym
  res = StackProf.run(mode: mode, interval: interval, raw: false) { work(iters) }
  puts "samples #{res[:samples]}"
else
  work(iters)
end
