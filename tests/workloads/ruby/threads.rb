# Two Ruby threads burning CPU in different methods; the main thread waits.
def burn(n)
  s = 0
  n.times { |i| s += i }
  s
end

def thread_alpha_work
  loop { burn(5000) }
end

def thread_beta_work
  loop { burn(5000) }
end

a = Thread.new { thread_alpha_work }
b = Thread.new { thread_beta_work }
a.join
b.join
