# Blocks 3:1 in wait_long and wait_short (30 ms and 10 ms sleeps) on one
# thread, the main thread waiting for it (off-CPU profile with Ruby
# frames). Usage: ruby block_3to1.rb SECONDS
def wait_long
  sleep 0.03
end

def wait_short
  sleep 0.01
end

def blocker
  loop do
    wait_long
    wait_short
  end
end

# a name of its own: perf's native stacks of this process would carry it
File.write("/proc/self/comm", "block3to1")
Thread.new { blocker }
puts "ready"
$stdout.flush
sleep((ARGV[0] || 30).to_f)
