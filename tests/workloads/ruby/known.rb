# Known call shapes for the ruby plugin's tests: plain methods, a block, a
# method made with define_method, and a C method (sort_by) calling a block.
# Runs until killed (or for ARGV[0] seconds).

class Shapes
  def spin(n)
    s = 0
    i = 0
    while i < n
      s += i
      i += 1
    end
    s
  end

  def with_block
    3.times { |k| spin(2000 + k) }
  end

  define_method(:defined_dynamically) do
    spin(3000)
  end

  def sorter
    [5, 3, 1, 4].sort_by { |x| spin(1000); x }
  end

  def outer_known_method
    with_block
    defined_dynamically
    sorter
  end
end

limit = ARGV[0] ? Time.now + ARGV[0].to_f : nil
shapes = Shapes.new
loop do
  shapes.outer_known_method
  break if limit && Time.now > limit
end
