// Package dailyquiz is the daily-quiz example: a schedule whose audience
// query joins the application's own tables so today's quiz reaches every
// opted-in user at 08:00 Seoul time (README.md). quiz_test.go runs it.
package dailyquiz
