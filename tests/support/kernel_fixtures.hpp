// Kernel plug-in fixtures placed in a kernel tree (see tests/plugin_fixtures).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace spite::test {

// Installs fixture library `name` (from `fixture_dir`) as <root>/<where>/<as>.so the way an
// installer does: a temporary file renamed into place, directories (the root too) and file
// mode 0755.
inline void install_fixture(const std::filesystem::path& root, const std::filesystem::path& fixture_dir,
                            const std::string& name, const std::string& where, const std::string& as) {
  namespace fs = std::filesystem;
  const fs::path dir = root / where;
  fs::create_directories(dir);
  ::chmod(root.c_str(), 0755);  // the loader checks the tree up to its root, whatever the umask
  for (fs::path d = dir; d != root; d = d.parent_path()) ::chmod(d.c_str(), 0755);
  const fs::path tmp = dir / ("." + as + ".tmp");
  fs::copy_file(fixture_dir / (name + ".so"), tmp, fs::copy_options::overwrite_existing);
  ::chmod(tmp.c_str(), 0755);
  fs::rename(tmp, dir / (as + ".so"));
}

}  // namespace spite::test
