// The tooltip rule of the widgets whose tooltip depends on the point under the mouse
// (timeline, allocator, flame graph): their event() answers QEvent::ToolTip through
// answer_tooltip() and passes everything else on.
#pragma once

#include <QHelpEvent>
#include <QToolTip>
#include <QWidget>

namespace tidemark::gui {

// For QEvent::ToolTip: shows text_at(the point) (empty: hides the tooltip) and returns true;
// for any other event returns false.
template <class F>
bool answer_tooltip(QWidget* w, QEvent* e, F&& text_at) {
  if (e->type() != QEvent::ToolTip) return false;
  auto* help = static_cast<QHelpEvent*>(e);
  const QString text = text_at(help->pos());
  if (text.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(help->globalPos(), text, w);
  return true;
}

}  // namespace tidemark::gui
