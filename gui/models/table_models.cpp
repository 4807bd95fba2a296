#include "gui/models/table_models.h"

#include "profiler/naming/units.h"

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
  m->setRoleData(AllocationRole, [](const SiteRow& r) -> QVariant {
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

TensorModel* make_tensor_model(QObject* parent) {
  std::vector<TableColumn<TensorRow>> cols = {
      {"Tensor", [](const TensorRow& r) { return unum(r.info.tensor_id); },
       [](const TensorRow& r) { return unum(r.info.tensor_id); }},
      {"View of",
       [](const TensorRow& r) {
         return r.info.base_id ? QVariant(unum(r.info.base_id)) : QVariant("-");
       },
       [](const TensorRow& r) { return unum(r.info.base_id); }},
      {"Sizes", [](const TensorRow& r) { return QVariant(text(r.info.sizes)); }, {}},
      {"Dtype", [](const TensorRow& r) { return QVariant(text(r.info.dtype)); }, {}},
      {"Op", [](const TensorRow& r) { return QVariant(text(r.info.op)); }, {}},
      {"Created", [](const TensorRow& r) { return QVariant(duration_text(r.created_ns)); },
       [](const TensorRow& r) { return unum(r.created_ns); }},
      {"Site", [](const TensorRow& r) { return QVariant(text(r.site)); }, {}},
  };
  auto* m = new TensorModel(
      std::move(cols), [](const TensorRow& r) { return std::make_pair(r.info.create_ts, r.at_ts); },
      parent);
  m->setRoleData(TensorRole, [](const TensorRow& r) { return unum(r.info.tensor_id); });
  return m;
}

DiffModel* make_diff_model(QObject* parent) {
  std::vector<TableColumn<DiffRow>> cols = {
      {"What", [](const DiffRow& r) { return QVariant(text(r.what)); }, {}},
      {"Device", [](const DiffRow& r) { return QVariant(text(r.device)); }, {}},
      {"Site or category", [](const DiffRow& r) { return QVariant(text(r.name)); }, {}},
      {"A", [](const DiffRow& r) { return QVariant(bytes_text(r.a)); },
       [](const DiffRow& r) { return num(r.a); }},
      {"B", [](const DiffRow& r) { return QVariant(bytes_text(r.b)); },
       [](const DiffRow& r) { return num(r.b); }},
      {"B - A",
       [](const DiffRow& r) {
         return QVariant((r.delta() > 0   ? "+"
                          : r.delta() < 0 ? "-"
                                          : "") +
                         bytes_text(r.delta() < 0 ? -r.delta() : r.delta()));
       },
       [](const DiffRow& r) { return num(r.delta()); }},
  };
  return new DiffModel(
      std::move(cols), [](const DiffRow&) { return std::make_pair(uint64_t(0), uint64_t(0)); },
      parent);
}

}  // namespace tidemark::gui
