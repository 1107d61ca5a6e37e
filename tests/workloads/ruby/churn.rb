# Hostile-to-samplers workload: threads born and dying all the time, fibers,
# methods defined by eval, and GC compaction moving objects under the reader.
def churn(n) = Array.new(n) { |i| "s#{i}" * 3 }.sort_by(&:size)
loop do
  ts = 4.times.map { Thread.new { 50.times { churn(200) } } }
  Fiber.new { churn(500); Fiber.yield; churn(100) }.resume
  k = rand(1000)
  eval("def dyn#{k}; churn(50); end; dyn#{k}")
  GC.compact if rand < 0.2 && GC.respond_to?(:compact)
  ts.each(&:join)
end
