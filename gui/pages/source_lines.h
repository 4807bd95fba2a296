// The Flame graph tab's source view (docs/gui.md, "Source lines"): one source file's lines with
// the bytes live at a device's allocated peak that were allocated under each -- what `tidemark
// top --by line --file FILE` lists (Note [Source lines] in profiler/analysis/memory.cpp) --
// beside the file's text when it can be read here, as memray and Mosaic map memory onto code.
#pragma once

#include <QWidget>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gui/models/async_query.h"
#include "gui/models/table_models.h"
#include "gui/models/trace_loader.h"

class QComboBox;
class QLabel;
class QTableView;

namespace tidemark::gui {

struct SourceLineRow {
  int line = 0;          // 1-based
  std::string text;      // the line's source, when the file could be read
  std::string function;  // the frames' function on this line, when any was allocated there
  int64_t bytes = 0;     // live at the peak, allocated under this line
  uint64_t count = 0;
};

struct SourceLines {
  std::string file;  // the file, as the frames name it (a full path when recorded so)
  std::string device;
  bool text_read = false;           // rows hold every line of the file, not only those with bytes
  int64_t peak_bytes = 0;           // live at the peak on the device
  int64_t outside_bytes = 0;        // ... allocated with no frame in the file
  std::vector<SourceLineRow> rows;  // by line
};

// The files of the sites live at the device's allocated peak (their frames' paths), most bytes
// first: what the view offers.
std::vector<std::pair<std::string, int64_t>> files_at_peak(const analysis::Trace& trace,
                                                           int64_t device);
// The lines of `file` at the device's allocated peak, under `trace`'s rule for frames; the
// file's text read from `file` when it is there.
SourceLines source_lines(analysis::Trace& trace, int64_t device, const std::string& file);

class SourceLinesPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SourceLinesPanel(QueryModePtr mode, QWidget* parent = nullptr);
  void setData(const TraceDataPtr& data);
  // Shows `file` (a path or trailing components, as --file takes them).
  void showFile(const QString& file);
  const SourceLines& shown() const { return shown_; }
  QComboBox* files() const { return files_; }

 private:
  struct Answer {
    std::vector<std::pair<std::string, int64_t>> files;  // set when the data is new
    SourceLines lines;
  };
  void show(Answer a);

  TraceDataPtr data_;
  QComboBox* files_;
  QLabel* note_;
  QTableView* table_;
  RowTableModel<SourceLineRow>* model_;
  SourceLines shown_;
  AsyncQuery<Answer> query_;
};

}  // namespace tidemark::gui
