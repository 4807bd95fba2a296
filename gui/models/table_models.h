// Table models over TraceData rows. Each model's only mutator is setRows(); views sort and
// filter through a QSortFilterProxyModel using SortRole (the raw number behind a formatted
// cell) and highlight a selected row's time span on the timeline through FromTsRole/ToTsRole.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QVariant>
#include <functional>
#include <map>
#include <vector>

#include "gui/models/trace_data.h"

namespace tidemark::gui {

enum TableRole {
  SortRole = Qt::UserRole + 1,
  FromTsRole,  // absolute ns, qulonglong
  ToTsRole,
  AllocationRole,  // QVariantList {device id, addr, alloc_ts} of the row's allocation, if any
  TensorRole,      // qulonglong: the row's tensor id (its Details), if any
};

QString bytes_text(int64_t bytes);
QString duration_text(uint64_t ns);

template <class Row>
struct TableColumn {
  QString title;
  std::function<QVariant(const Row&)> display;
  std::function<QVariant(const Row&)> sort;  // empty: sort by `display`
};

// A table of `Row`s with fixed columns; numbers right-aligned.
template <class Row>
class RowTableModel : public QAbstractTableModel {
 public:
  using Span = std::function<std::pair<uint64_t, uint64_t>(const Row&)>;
  RowTableModel(std::vector<TableColumn<Row>> columns, Span span, QObject* parent = nullptr)
      : QAbstractTableModel(parent), columns_(std::move(columns)), span_(std::move(span)) {}

  void setRows(std::vector<Row> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
  }
  const std::vector<Row>& rows() const { return rows_; }
  // What `role` (AllocationRole, TensorRole) answers for a row; without one: nothing.
  void setRoleData(int role, std::function<QVariant(const Row&)> f) { extra_[role] = std::move(f); }

  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(columns_.size());
  }
  QVariant data(const QModelIndex& index, int role) const override {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
      return {};
    const Row& row = rows_[static_cast<size_t>(index.row())];
    const TableColumn<Row>& col = columns_[static_cast<size_t>(index.column())];
    switch (role) {
      case Qt::DisplayRole:
        return col.display(row);
      case SortRole:
        return col.sort ? col.sort(row) : col.display(row);
      case Qt::TextAlignmentRole:
        return col.sort ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
      case FromTsRole:
        return QVariant::fromValue<qulonglong>(span_(row).first);
      case ToTsRole:
        return QVariant::fromValue<qulonglong>(span_(row).second);
      default: {
        auto it = extra_.find(role);
        return it != extra_.end() ? it->second(row) : QVariant();
      }
    }
  }
  QVariant headerData(int section, Qt::Orientation o, int role) const override {
    if (o != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= columnCount())
      return {};
    return columns_[static_cast<size_t>(section)].title;
  }

 private:
  std::vector<TableColumn<Row>> columns_;
  Span span_;
  std::map<int, std::function<QVariant(const Row&)>> extra_;
  std::vector<Row> rows_;
};

using SiteModel = RowTableModel<SiteRow>;
using SyncSiteModel = RowTableModel<SyncSiteRow>;
using StepModel = RowTableModel<StepRow>;
using TensorModel = RowTableModel<TensorRow>;
using DiffModel = RowTableModel<DiffRow>;

// Allocations grouped by site (live at the peak, or leaked). `origin_ns` turns absolute times
// into the relative ones shown.
SiteModel* make_site_model(QObject* parent);
SyncSiteModel* make_sync_model(QObject* parent);
StepModel* make_step_model(uint64_t origin_ns, QObject* parent);
// Tensors live at a time; TensorRole gives a row's tensor id.
TensorModel* make_tensor_model(QObject* parent);
// The differences between two traces (Compare).
DiffModel* make_diff_model(QObject* parent);

}  // namespace tidemark::gui
