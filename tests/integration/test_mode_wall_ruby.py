"""--mode wall for Ruby (mapped onto ruby.oncpu false): a sleeping and a
burning thread both show; --mode cpu shows the burner only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modeutil  # noqa: E402
import pputil as u  # noqa: E402
import rubyutil  # noqa: E402

plugin = rubyutil.require_ruby_plugin()
script = os.path.join(modeutil.WORKLOADS, "sleep_burn.rb")
modeutil.check_wall_and_cpu(plugin, [rubyutil.RUBY, script, "60"], "sleep_burn.rb", "sleeper",
                            "burner")
u.finish()
