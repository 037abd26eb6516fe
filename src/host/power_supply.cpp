#include "host/power_supply.h"

#include <algorithm>

#include "core/parse_number.h"

namespace gpud::host {

namespace {

// nullopt value: the file is absent. An error: present but garbled.
Result<std::optional<int>> read_optional_int(const HostFs& fs, const std::string& file, int min,
                                             int max) {
  if (!fs.exists(file)) return std::optional<int>();
  auto line = fs.read_line(file);
  if (!line) return line.error();
  auto v = parse_integer<int>(*line);
  if (!v || *v < min || *v > max) return make_error("\"" + line->substr(0, 40) + "\"");
  return std::optional<int>(*v);
}

}  // namespace

Result<PowerSupplies> read_power_supplies(const HostFs& fs) {
  PowerSupplies out;
  if (!fs.exists(kPowerSupplyDir)) return out;
  out.class_present = true;
  auto names = fs.list(kPowerSupplyDir);
  if (!names) return names.error();
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    PowerSupply s;
    s.name = name;
    const std::string dir = std::string(kPowerSupplyDir) + "/" + name;
    std::vector<std::string> errors;
    if (auto t = fs.read_line(dir + "/type"); !t || t->empty())
      errors.push_back("type unreadable");
    else
      s.type = *t;
    if (auto p = read_optional_int(fs, dir + "/present", 0, 1); !p)
      errors.push_back("present not 0 or 1: " + p.error().message);
    else if (p->has_value())
      s.present = **p != 0;
    if (auto o = read_optional_int(fs, dir + "/online", 0, 2); !o)
      errors.push_back("online not 0, 1 or 2: " + o.error().message);
    else
      s.online = *o;
    if (auto c = read_optional_int(fs, dir + "/capacity", 0, 100); !c)
      errors.push_back("capacity not a percentage: " + c.error().message);
    else
      s.capacity_percent = *c;
    if (fs.exists(dir + "/status")) {
      if (auto st = fs.read_line(dir + "/status"); st)
        s.status = *st;
      else
        errors.push_back("status unreadable");
    }
    for (size_t i = 0; i < errors.size(); ++i) s.error += (i == 0 ? "" : ", ") + errors[i];
    out.supplies.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpud::host
