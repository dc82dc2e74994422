// Phone navigation and the desktop sidebar toggle for sphinx-book-theme 1.3.0 on pydata-sphinx-theme
// 0.17.1. Upstream bug: pydata-sphinx-theme #2451 (also reported as sphinx-book-theme #988). Since
// pydata-sphinx-theme 0.17.0 a page has two buttons with class `primary-toggle` (one in the theme's
// header, one in the book theme's article header) and two with `secondary-toggle`; both themes attach
// their click handlers with `document.querySelector`, i.e. to the first button only, which the book
// theme hides. The visible ☰ and "On this page" buttons therefore do nothing: on a phone the sidebar
// dialog never opens, on a desktop ☰ never collapses the sidebar.
// The shim forwards a click on any other toggle to the first one, so the themes' own handlers run
// (open the dialog on narrow screens, collapse the sidebar on wide ones). Remove it when the pinned
// themes bind every toggle; tools/site_check.py checks that the buttons work either way, and that no
// tooltip stays up once "On this page" closes.
(function () {
  function forwardClicks(selector) {
    var buttons = document.querySelectorAll(selector);
    if (buttons.length < 2) return;
    var handled = buttons[0];
    for (var i = 1; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        handled.click();
      });
    }
  }
  // On a phone, the tooltip of the button that opened a sidebar ("Toggle secondary sidebar") shows
  // again when the dialog closes and focus returns to the button, and stays: it sits over the page
  // and takes the next tap. When a dialog closes, the toggles lose focus and hover (Bootstrap then
  // hides their tooltips), and any tooltip still shown is removed.
  function hideTooltips() {
    document.querySelectorAll(".primary-toggle, .secondary-toggle").forEach(function (button) {
      button.dispatchEvent(new MouseEvent("mouseout", { bubbles: true }));
      button.dispatchEvent(new FocusEvent("focusout", { bubbles: true }));
      button.blur();
    });
    window.setTimeout(function () {
      document.querySelectorAll(".tooltip").forEach(function (tip) { tip.remove(); });
    }, 150);
  }
  function setup() {
    forwardClicks(".primary-toggle");
    forwardClicks(".secondary-toggle");
    document.querySelectorAll("dialog").forEach(function (dialog) {
      dialog.addEventListener("close", hideTooltips);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
