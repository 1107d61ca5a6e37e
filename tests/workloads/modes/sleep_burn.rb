# One thread sleeps, one burns CPU (profile types: wall shows both, cpu
# only the burner). Usage: sleep_burn.rb SECONDS
def sleeper
  loop { sleep 0.05 }
end

def burner
  x = 0
  loop { x += 1 }
end

Thread.new { sleeper }
Thread.new { burner }
$stdout.puts "ready"
$stdout.flush
sleep((ARGV[0] || "30").to_f)
