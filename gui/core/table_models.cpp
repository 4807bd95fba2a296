#include "gui/core/table_models.h"

#include "profiler/analysis/units.h"

namespace tidemark::gui {

QString bytes_text(int64_t bytes) {
  return QString::fromStdString(analysis::format_bytes(bytes));
}
QString duration_text(uint64_t ns) {
  return QString::fromStdString(analysis::format_duration(ns));
}

namespace {
QVariant num(int64_t v) {
  return QVariant::fromValue<qlonglong>(v);
}
QVariant unum(uint64_t v) {
  return QVariant::fromValue<qulonglong>(v);
}
QString text(const std::string& s) {
  return QString::fromStdString(s);
}
}  // namespace

SiteModel* make_site_model(QObject* parent) {
  std::vector<TableColumn<SiteRow>> cols = {
      {"Site", [](const SiteRow& r) { return QVariant(text(r.site)); }, {}},
      {"Bytes", [](const SiteRow& r) { return QVariant(bytes_text(r.bytes)); },
       [](const SiteRow& r) { return num(r.bytes); }},
      {"Requested", [](const SiteRow& r) { return QVariant(bytes_text(r.requested_bytes)); },
       [](const SiteRow& r) { return num(r.requested_bytes); }},
      {"Count", [](const SiteRow& r) { return unum(r.count); },
       [](const SiteRow& r) { return unum(r.count); }},
      {"Device", [](const SiteRow& r) { return QVariant(text(r.device)); }, {}},
  };
  auto* m = new SiteModel(
      std::move(cols), [](const SiteRow& r) { return std::make_pair(r.first_ts, r.last_ts); },
      parent);
  m->setAllocation([](const SiteRow& r) -> QVariant {
    if (r.largest_alloc_ts == 0) return {};
    return QVariantList{QVariant::fromValue<qlonglong>(r.device_id),
                        QVariant::fromValue<qulonglong>(r.largest_addr),
                        QVariant::fromValue<qulonglong>(r.largest_alloc_ts)};
  });
  return m;
}

SyncSiteModel* make_sync_model(QObject* parent) {
  std::vector<TableColumn<SyncSiteRow>> cols = {
      {"Site", [](const SyncSiteRow& r) { return QVariant(text(r.site.label)); }, {}},
      {"Kind", [](const SyncSiteRow& r) { return QVariant(text(r.site.kind)); }, {}},
      {"Count", [](const SyncSiteRow& r) { return unum(r.site.count); },
       [](const SyncSiteRow& r) { return unum(r.site.count); }},
      {"Total wait", [](const SyncSiteRow& r) { return QVariant(duration_text(r.site.total_ns)); },
       [](const SyncSiteRow& r) { return unum(r.site.total_ns); }},
      {"Longest", [](const SyncSiteRow& r) { return QVariant(duration_text(r.site.max_ns)); },
       [](const SyncSiteRow& r) { return unum(r.site.max_ns); }},
  };
  return new SyncSiteModel(
      std::move(cols), [](const SyncSiteRow& r) { return std::make_pair(r.first_ts, r.last_ts); },
      parent);
}

StepModel* make_step_model(uint64_t origin_ns, QObject* parent) {
  std::vector<TableColumn<StepRow>> cols = {
      {"Step", [](const StepRow& r) { return num(r.stats.number); },
       [](const StepRow& r) { return num(r.stats.number); }},
      {"Device", [](const StepRow& r) { return QVariant(text(r.device)); }, {}},
      {"Start", [](const StepRow& r) { return QVariant(duration_text(r.stats.start_ns)); },
       [](const StepRow& r) { return unum(r.stats.start_ns); }},
      {"Duration", [](const StepRow& r) { return QVariant(duration_text(r.stats.duration_ns)); },
       [](const StepRow& r) { return unum(r.stats.duration_ns); }},
      {"Allocated at start",
       [](const StepRow& r) { return QVariant(bytes_text(r.stats.allocated_at_start_bytes)); },
       [](const StepRow& r) { return num(r.stats.allocated_at_start_bytes); }},
      {"Peak allocated",
       [](const StepRow& r) { return QVariant(bytes_text(r.stats.peak_allocated_bytes)); },
       [](const StepRow& r) { return num(r.stats.peak_allocated_bytes); }},
      {"Peak reserved",
       [](const StepRow& r) { return QVariant(bytes_text(r.stats.peak_reserved_bytes)); },
       [](const StepRow& r) { return num(r.stats.peak_reserved_bytes); }},
      {"Allocs", [](const StepRow& r) { return unum(r.stats.alloc_count); },
       [](const StepRow& r) { return unum(r.stats.alloc_count); }},
      {"Syncs", [](const StepRow& r) { return unum(r.stats.sync_count); },
       [](const StepRow& r) { return unum(r.stats.sync_count); }},
  };
  return new StepModel(
      std::move(cols),
      [origin_ns](const StepRow& r) {
        const uint64_t start = origin_ns + r.stats.start_ns;
        return std::make_pair(start, start + r.stats.duration_ns);
      },
      parent);
}

}  // namespace tidemark::gui
